// Helpers every CUDA source of the trainer shares: ceil-div, warp and block reductions, the
// storage types of the precision modes (floatX) with their conversions, and the error macros
// that turn a CUDA or cuBLAS failure into an absl::Status carrying the call and file:line.
//
// Device helpers assume full warps of 32 lanes (callers launch multiples of 32 threads).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainer/cuda/cuda_status.h"

namespace ringmaster::trainer::cuda {

inline constexpr int kWarpSize = 32;

template <typename T>
__host__ __device__ constexpr T CeilDiv(T a, T b) {
  return (a + b - 1) / b;
}

// Sum / max over the 32 lanes of a warp; every lane gets the result.
__device__ inline float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of kThreads (a multiple of 32, at most 1024) through `scratch` (32 floats of
// shared memory); every thread gets the result. The order is fixed by kThreads, so the result
// is deterministic. Contains barriers: every thread of the block must call it.
template <int kThreads>
__device__ inline float BlockSum(float v, float* scratch) {
  static_assert(kThreads % kWarpSize == 0 && kThreads <= 1024, "block of whole warps");
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < kWarps ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  __syncthreads();  // scratch may be reused by the caller right after
  return total;
}

// Storage types of activations and GEMM operands by precision: fp32 (sm_61 and the reference),
// bf16 (sm_80+), fp16 (sm_70/75). Arithmetic is always fp32: load with ToFloat, store with
// FromFloat<T> (round to nearest even).
__host__ __device__ inline float ToFloat(float v) { return v; }
__host__ __device__ inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__host__ __device__ inline float ToFloat(__half v) { return __half2float(v); }

template <typename T>
__host__ __device__ inline T FromFloat(float v);
template <>
__host__ __device__ inline float FromFloat<float>(float v) {
  return v;
}
template <>
__host__ __device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__host__ __device__ inline __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}

}  // namespace ringmaster::trainer::cuda
