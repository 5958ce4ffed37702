// LayerNorm forward: one warp per row, two passes over the row in registers/L1 (mean, then the
// centred variance, as the CPU reference does, for the same rounding behaviour).
#include "trainer/cuda/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__device__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void LayerNormForwardKernel(const float* x, const float* gamma, const float* beta,
                                       float* y, float* mean, float* rstd, int N, int H,
                                       float eps) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const float* xr = x + static_cast<size_t>(row) * H;
  float s = 0.0f;
  for (int j = lane; j < H; j += 32) s += xr[j];
  const float m = WarpSum(s) / H;
  float v = 0.0f;
  for (int j = lane; j < H; j += 32) v += (xr[j] - m) * (xr[j] - m);
  const float r = rsqrtf(WarpSum(v) / H + eps);
  float* yr = y + static_cast<size_t>(row) * H;
  for (int j = lane; j < H; j += 32) yr[j] = (xr[j] - m) * r * gamma[j] + beta[j];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

}  // namespace

cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                             float* mean, float* rstd, int N, int H, float eps,
                             cudaStream_t stream) {
  if (N <= 0 || H <= 0) return cudaErrorInvalidValue;
  constexpr int kWarps = 8;
  const int blocks = (N + kWarps - 1) / kWarps;
  LayerNormForwardKernel<<<blocks, kWarps * 32, 0, stream>>>(x, gamma, beta, y, mean, rstd, N, H,
                                                             eps);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
