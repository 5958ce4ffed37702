// Exact GELU, forward and backward: elementwise, memory bound; a grid-stride loop so one launch
// covers any n.
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void GeluForwardKernel(const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

__global__ void GeluBackwardKernel(const float* dy, const float* x, float* dx, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    const float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

int Blocks(size_t n, int threads) {
  const size_t b = CeilDiv<size_t>(n, threads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

}  // namespace

cudaError_t GeluForward(const float* x, float* y, size_t n, cudaStream_t stream) {
  DeclareKernelCost(ElementwiseCost(n, 1, 1, 8));
  GeluForwardKernel<<<Blocks(n, 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t GeluBackward(const float* dy, const float* x, float* dx, size_t n,
                         cudaStream_t stream) {
  DeclareKernelCost(ElementwiseCost(n, 2, 1, 12));
  GeluBackwardKernel<<<Blocks(n, 256), 256, 0, stream>>>(dy, x, dx, n);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
