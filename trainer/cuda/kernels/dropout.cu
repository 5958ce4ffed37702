// Inverted dropout with the counter-based mask of cpu::DropoutForward: element i of a launch
// keeps iff UniformAt(seed, i) >= p, so the mask is the CPU's for the same seed.
#include "trainer/cuda/kernels/counter_rng.cuh"
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void DropoutForwardKernel(float* x, float* mask, size_t n, float p, float scale,
                                     uint64_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float m = UniformAt(seed, i) >= p ? scale : 0.0f;
    mask[i] = m;
    x[i] *= m;
  }
}

__global__ void DropoutBackwardKernel(float* dx, const float* mask, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dx[i] *= mask[i];
  }
}

__global__ void UniformFillKernel(float* out, size_t n, uint64_t seed, uint64_t first) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = UniformAt(seed, first + i);
  }
}

int Blocks(size_t n, int threads) {
  const size_t b = CeilDiv<size_t>(n, threads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

}  // namespace

cudaError_t DropoutForward(float* x, float* mask, size_t n, float p, uint64_t seed,
                           cudaStream_t stream) {
  if (p <= 0.0f || n == 0) return cudaSuccess;  // identity, mask untouched (as on the CPU)
  if (p >= 1.0f) return cudaErrorInvalidValue;
  // Same expression as the CPU: T(1) / (T(1) - T(p)) in fp32.
  const float scale = 1.0f / (1.0f - p);
  DeclareKernelCost(ElementwiseCost(n, 1, 2, 12));  // x in place, the float mask out
  DropoutForwardKernel<<<Blocks(n, 256), 256, 0, stream>>>(x, mask, n, p, scale, seed);
  return cudaGetLastError();
}

cudaError_t DropoutBackward(float* dx, const float* mask, size_t n, float p, cudaStream_t stream) {
  if (p <= 0.0f || n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 2, 1, 1));
  DropoutBackwardKernel<<<Blocks(n, 256), 256, 0, stream>>>(dx, mask, n);
  return cudaGetLastError();
}

cudaError_t UniformFill(float* out, size_t n, uint64_t seed, uint64_t first_index,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 0, 1, 10));
  UniformFillKernel<<<Blocks(n, 256), 256, 0, stream>>>(out, n, seed, first_index);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
