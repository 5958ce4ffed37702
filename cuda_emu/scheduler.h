// Runs a grid: each block on one OS worker thread, each CUDA thread of the block a fiber
// (Boost.Context fcontext, ~35 ns a switch). A fiber runs until it reaches a barrier
// (__syncthreads, __syncwarp, a *_sync warp collective) or returns; when no fiber is runnable the
// scheduler resolves the barriers (warp collectives are computed there, all lanes at once) and
// reports deadlocks and divergence instead of hanging. The order of fibers in each round and of
// blocks is the schedule (options.h), so a test can run a kernel under several interleavings.
//
// The fast path: a kernel the rewrite step found fiber-free (cuda_emu_fiber_free.py: nothing it
// reaches waits for another thread or shares memory with one) runs each CUDA thread to
// completion on the worker's own stack, no fiber, in the order the first round of fibers would
// have had (the same schedule, the same random draws), so its effects, and what the detectors
// see, are those of the fiber run. A barrier, warp collective or shared memory reached there
// anyway (a misclassification) fails the launch with an error naming the kernel and the call.
#pragma once

#include <cuda_runtime.h>

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cuda_emu {

enum class Wait : uint8_t { kRun, kBlock, kWarp, kDone };
enum class WarpOp : uint8_t { kSync, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll };
enum class BlockOp : uint8_t { kSync, kCount, kAnd, kOr };

// One CUDA thread.
struct Lane {
  boost::context::detail::fcontext_t ctx = nullptr;
  Wait wait = Wait::kRun;
  uint3 tid{};
  int index = 0;  // linear thread index in the block
  // The collective this lane waits at.
  unsigned mask = 0;
  WarpOp op = WarpOp::kSync;
  BlockOp bop = BlockOp::kSync;
  int arg = 0, width = 32, pred = 0;
  unsigned char val[16] = {}, res[16] = {};
  unsigned bres = 0;
  const char* file = "";  // call site of the barrier (file:line in reports)
  int line = 0;
  char* stack = nullptr;
  size_t stack_bytes = 0;
};

// One block being run by a worker.
struct Block {
  dim3 grid, block;
  uint3 bid{};
  int nthreads = 0;
  std::vector<Lane> lanes;
  boost::context::detail::fcontext_t sched = nullptr;
  void (*body)(void*) = nullptr;
  void* closure = nullptr;
  std::vector<unsigned char> dyn;  // dynamic shared memory plus a guard zone (bounds detector)
  size_t dyn_bytes = 0;
  const char* kernel = "";
  std::string error;
  uint64_t launch = 0;                // 1-based launch number (global race detector)
  unsigned epoch = 0;                 // __syncthreads generation (race detector)
  unsigned warp_epoch[32] = {};       // per-warp barrier generation (race detector)
  const void* sched_stack = nullptr;  // AddressSanitizer fiber-switch bookkeeping
  size_t sched_stack_bytes = 0;
  bool fast = false;  // running on the fast path (no fibers)
};

// The block and lane running on this OS thread (null outside kernels). constinit: the compiler
// reads them directly, without a TLS wrapper call.
extern constinit thread_local Block* tl_block;
extern constinit thread_local Lane* tl_lane;

// Runs `body(closure)` for every thread of the grid, on the fast path if fiber_free (and
// CUDA_EMU_FAST_PATH is not 0). Errors go to ReportError; returns false if any block failed.
bool RunGrid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared, void (*body)(void*),
             void* closure, bool fiber_free);

// Called by the running fiber: park at a warp collective / block barrier until it resolves.
// file:line is the call site (named in reports).
void ParkAtWarp(unsigned mask, WarpOp op, int arg, int width, int pred, const void* value,
                size_t bytes, void* result, const char* file, int line);
unsigned ParkAtBlock(BlockOp op, int pred, const char* file, int line);

// A thread on the fast path reached `what` (a barrier, a warp collective, shared memory) at
// file:line: fails the block with an error naming the kernel, the thread and the call, and
// unwinds the thread (never returns).
[[noreturn]] void FastPathViolation(const char* what, const char* file, int line);

inline void* DynamicShared(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (tl_block->fast) FastPathViolation("extern __shared__ memory", file, line);
  return tl_block->dyn.data();
}

// Storage of one static __shared__ variable (T, an array type as a rule) for the blocks the
// owning OS thread runs, on the heap. A thread_local array would sit in the static TLS of every
// thread of the process, which glibc carves out of each thread's stack, also of threads that never
// run a kernel: a web server's 100 KiB worker stacks overflowed with 4 KiB of kernel arrays there.
template <typename T>
class StaticShared {
 public:
  T& get() {
    if (!storage_) storage_.reset(new Storage);  // uninitialised, as shared memory is
    return storage_->value;
  }

 private:
  struct alignas(64) Storage {
    T value;
  };
  std::unique_ptr<Storage> storage_;
};

}  // namespace cuda_emu
