// The device side of CUDA C++ for kernels compiled as host C++: thread indices, barriers, warp
// collectives, atomics and the math intrinsics the toolkit headers declare only for nvcc.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_emu/scheduler.h"

namespace cuda_emu {

template <typename T>
T WarpCollective(unsigned mask, T v, WarpOp op, int arg, int width, int pred, const char* file,
                 int line) {
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>, "shuffle of this type");
  T r = v;
  ParkAtWarp(mask, op, arg, width, pred, &v, sizeof(T), &r, file, line);
  return r;
}

// Atomics are real atomics: blocks may run on several worker threads (CUDA_EMU_WORKERS).
enum class AtomicOp { kAdd, kMax, kMin, kExch };
template <typename T>
T AtomicRmw(T* p, T v, AtomicOp op) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic of this size");
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  U* q = reinterpret_cast<U*>(p);
  U old = __atomic_load_n(q, __ATOMIC_RELAXED), next;
  T o;
  do {
    memcpy(&o, &old, sizeof(T));
    const T n = op == AtomicOp::kAdd   ? static_cast<T>(o + v)
                : op == AtomicOp::kMax ? (v > o ? v : o)
                : op == AtomicOp::kMin ? (v < o ? v : o)
                                       : v;
    memcpy(&next, &n, sizeof(T));
  } while (!__atomic_compare_exchange_n(q, &old, next, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
  return o;
}

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::tl_lane->tid)
#define blockIdx (::cuda_emu::tl_block->bid)
#define blockDim (::cuda_emu::tl_block->block)
#define gridDim (::cuda_emu::tl_block->grid)
#define warpSize 32

// __syncthreads records its call site: divergent barriers are reported with both lines.
#define __syncthreads() \
  ((void)::cuda_emu::ParkAtBlock(::cuda_emu::BlockOp::kSync, 0, __FILE__, __LINE__))
#define __syncthreads_count(p) \
  static_cast<int>(            \
      ::cuda_emu::ParkAtBlock(::cuda_emu::BlockOp::kCount, (p) != 0, __FILE__, __LINE__))
#define __syncthreads_and(p) \
  static_cast<int>(::cuda_emu::ParkAtBlock(::cuda_emu::BlockOp::kAnd, (p) != 0, __FILE__, __LINE__))
#define __syncthreads_or(p) \
  static_cast<int>(::cuda_emu::ParkAtBlock(::cuda_emu::BlockOp::kOr, (p) != 0, __FILE__, __LINE__))

// The call site (the caller's file:line, through the default arguments) is named in reports.
#define CUDA_EMU_SITE const char *file = __builtin_FILE(), int line = __builtin_LINE()
inline void __syncwarp(unsigned mask = 0xffffffffu, CUDA_EMU_SITE) {
  ::cuda_emu::WarpCollective(mask, 0, ::cuda_emu::WarpOp::kSync, 0, 32, 0, file, line);
}
template <typename T>
T __shfl_sync(unsigned m, T v, int src, int w = 32, CUDA_EMU_SITE) {
  return ::cuda_emu::WarpCollective(m, v, ::cuda_emu::WarpOp::kShflIdx, src, w, 0, file, line);
}
template <typename T>
T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32, CUDA_EMU_SITE) {
  return ::cuda_emu::WarpCollective(m, v, ::cuda_emu::WarpOp::kShflUp, static_cast<int>(d), w, 0,
                                    file, line);
}
template <typename T>
T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32, CUDA_EMU_SITE) {
  return ::cuda_emu::WarpCollective(m, v, ::cuda_emu::WarpOp::kShflDown, static_cast<int>(d), w, 0,
                                    file, line);
}
template <typename T>
T __shfl_xor_sync(unsigned m, T v, int lane_mask, int w = 32, CUDA_EMU_SITE) {
  return ::cuda_emu::WarpCollective(m, v, ::cuda_emu::WarpOp::kShflXor, lane_mask, w, 0, file,
                                    line);
}
inline unsigned __ballot_sync(unsigned m, int p, CUDA_EMU_SITE) {
  ::cuda_emu::WarpCollective(m, 0, ::cuda_emu::WarpOp::kBallot, 0, 32, p != 0, file, line);
  return ::cuda_emu::tl_lane->bres;
}
inline int __any_sync(unsigned m, int p, CUDA_EMU_SITE) {
  ::cuda_emu::WarpCollective(m, 0, ::cuda_emu::WarpOp::kAny, 0, 32, p != 0, file, line);
  return static_cast<int>(::cuda_emu::tl_lane->bres);
}
inline int __all_sync(unsigned m, int p, CUDA_EMU_SITE) {
  ::cuda_emu::WarpCollective(m, 0, ::cuda_emu::WarpOp::kAll, 0, 32, p != 0, file, line);
  return static_cast<int>(::cuda_emu::tl_lane->bres);
}
#undef CUDA_EMU_SITE
inline unsigned __activemask() { return 0xffffffffu; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <typename T>
T atomicAdd(T* p, T v) {
  return ::cuda_emu::AtomicRmw(p, v, ::cuda_emu::AtomicOp::kAdd);
}
template <typename T>
T atomicSub(T* p, T v) {
  return ::cuda_emu::AtomicRmw(p, static_cast<T>(-v), ::cuda_emu::AtomicOp::kAdd);
}
template <typename T>
T atomicMax(T* p, T v) {
  return ::cuda_emu::AtomicRmw(p, v, ::cuda_emu::AtomicOp::kMax);
}
template <typename T>
T atomicMin(T* p, T v) {
  return ::cuda_emu::AtomicRmw(p, v, ::cuda_emu::AtomicOp::kMin);
}
template <typename T>
T atomicExch(T* p, T v) {
  return ::cuda_emu::AtomicRmw(p, v, ::cuda_emu::AtomicOp::kExch);
}
template <typename T>
T atomicCAS(T* p, T compare, T v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}

// Math the toolkit declares only for device code. The fast intrinsics (__expf, __fdividef) are
// approximate on a GPU (2 ulp and more); here they are the exact library functions, so a test
// tolerance must be set for the GPU, not from the emulator's error.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
inline float __uint_as_float(unsigned i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned i;
  memcpy(&i, &f, 4);
  return i;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz(static_cast<unsigned>(x)) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}

// CUDA's global min/max overloads (device code calls them unqualified).
#define CUDA_EMU_MINMAX(T)                         \
  inline T min(T a, T b) { return a < b ? a : b; } \
  inline T max(T a, T b) { return a > b ? a : b; }
CUDA_EMU_MINMAX(int)
CUDA_EMU_MINMAX(unsigned)
CUDA_EMU_MINMAX(long)
CUDA_EMU_MINMAX(unsigned long)
CUDA_EMU_MINMAX(long long)
CUDA_EMU_MINMAX(unsigned long long)
#undef CUDA_EMU_MINMAX
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
