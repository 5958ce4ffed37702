// Kernel launches. The rewrite step (cuda_emu_rewrite.py) turns
//   kernel<<<grid, block, shared, stream>>>(args...)
// into
//   ::cuda_emu::Launch("kernel", kernel, grid, block, shared, stream)(args...)
// which checks the launch (shape, shared memory, pointer arguments) at the call and runs the
// grid in its stream's order: at the call, or later under CUDA_EMU_STREAMS=lazy (streams.h).
// A kernel the rewrite step finds fiber-free (no barrier, warp collective or shared memory in
// anything it reaches; cuda_emu_fiber_free.py) is launched with LaunchFiberFree instead: its
// threads run one after another to completion, without fibers (scheduler.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_emu/census.h"
#include "cuda_emu/streams.h"

namespace cuda_emu {

// The dynamic shared memory limit set for a kernel by cudaFuncSetAttribute (48 KiB if none).
int MaxDynamicShared(const void* kernel);

// Checks the launch shape and shared memory (launch detector); reports and returns false if bad.
bool CheckLaunch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t shared);
// Checks one pointer argument (pointers detector): null or inside a device allocation.
bool CheckPointerArgument(const char* name, int index, const void* p);
// Runs the grid and the post-launch checks (bounds guards); fiber_free: on the fast path.
void RunLaunch(const char* name, dim3 grid, dim3 block, size_t shared, void (*body)(void*),
               void* closure, bool fiber_free);

template <typename F, typename Tuple>
struct Closure {
  F f;
  Tuple args;
  static void Call(void* p) {
    auto* c = static_cast<Closure*>(p);
    std::apply(c->f, c->args);  // each CUDA thread gets the launch's copy of the arguments
  }
};

template <typename... P>
struct Launcher {
  const char* name;
  void (*kernel)(P...);
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  bool fiber_free = false;

  template <typename... A>
  void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "kernel argument count");
    if (!CheckLaunch(name, reinterpret_cast<const void*>(kernel), grid, block, shared)) return;
    std::tuple<P...> args(static_cast<P>(std::forward<A>(a))...);
    bool ok = true;
    int index = 0;
    std::apply(
        [&](const auto&... v) {
          auto check = [&](const auto& x) {
            if constexpr (std::is_pointer_v<std::decay_t<decltype(x)>>) {
              ok = CheckPointerArgument(name, index, static_cast<const void*>(x)) && ok;
            }
            ++index;
          };
          (check(v), ...);
        },
        args);
    if (!ok) return;
    CensusLaunch(name);
    if (CensusDryRun()) return;  // counted, not run (census.h)
    // The grid runs at its stream's turn (streams.h), with the launch's copy of the arguments.
    Submit(stream,
           [name = name, grid = grid, block = block, shared = shared, fiber_free = fiber_free,
            c = Closure<void (*)(P...), std::tuple<P...>>{kernel, std::move(args)}]() mutable {
             RunLaunch(name, grid, block, shared, &decltype(c)::Call, &c, fiber_free);
           });
  }
};

template <typename... P>
Launcher<P...> Launch(const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
                      size_t shared = 0, cudaStream_t stream = nullptr) {
  return Launcher<P...>{name, kernel, grid, block, shared, stream};
}

// The rewrite step's launch of a kernel it found fiber-free. Written by hand only to seed a
// misclassification in a test: a barrier, warp collective or shared memory reached on the fast
// path fails the launch with an error naming the kernel and the call.
template <typename... P>
Launcher<P...> LaunchFiberFree(const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
                               size_t shared = 0, cudaStream_t stream = nullptr) {
  return Launcher<P...>{name, kernel, grid, block, shared, stream, true};
}

}  // namespace cuda_emu
