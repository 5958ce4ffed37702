// fp32 → bf16 / fp16 casts for the mixed-precision GEMMs (round to nearest even; fp16 overflows
// to ±inf, NaN stays NaN), and an in-place scale for fp16 loss-scaling's unscale. Elementwise,
// memory bound: a grid-stride loop so one launch covers any n. CPU references: cpu_half.h.
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void CastToBf16Kernel(const float* x, __nv_bfloat16* y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16_rn(x[i]);
  }
}

__global__ void CastToFp16Kernel(const float* x, __half* y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2half_rn(x[i]);
  }
}

__global__ void ScaleKernel(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] *= factor;
  }
}

int Blocks(size_t n, int threads) {
  const size_t b = CeilDiv<size_t>(n, threads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

}  // namespace

cudaError_t CastToBf16(const float* x, __nv_bfloat16* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost({4.0 * n, 2.0 * n, 1.0 * n});
  CastToBf16Kernel<<<Blocks(n, 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t CastToFp16(const float* x, __half* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost({4.0 * n, 2.0 * n, 1.0 * n});
  CastToFp16Kernel<<<Blocks(n, 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t ScaleInPlace(float* x, size_t n, float factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 1, 1, 1));
  ScaleKernel<<<Blocks(n, 256), 256, 0, stream>>>(x, n, factor);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
