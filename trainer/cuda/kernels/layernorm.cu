// LayerNorm forward: one warp per row, two passes over the row in registers/L1 (mean, then the
// centred variance, as the CPU reference does, for the same rounding behaviour).
// LayerNorm backward: dx one warp per row; dgamma/dbeta by a deterministic two-stage reduction
// (per row-chunk partial sums into scratch, then a per-column sum over the chunks in order).
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

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

constexpr int kRowsPerChunk = 64;

int Chunks(int N) { return CeilDiv(N, kRowsPerChunk); }

// dx = (dy·γ − mean(dy·γ) − x̂·mean(dy·γ·x̂))·rstd, one warp per row (overwrites dx).
__global__ void LayerNormBackwardDxKernel(const float* dy, const float* x, const float* gamma,
                                          const float* mean, const float* rstd, float* dx, int N,
                                          int H) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const size_t base = static_cast<size_t>(row) * H;
  const float m = mean[row], r = rstd[row];
  float s1 = 0.0f, s2 = 0.0f;
  for (int j = lane; j < H; j += 32) {
    const float xhat = (x[base + j] - m) * r;
    const float dxhat = dy[base + j] * gamma[j];
    s1 += dxhat;
    s2 += dxhat * xhat;
  }
  const float a = WarpSum(s1) / H, b = WarpSum(s2) / H;
  for (int j = lane; j < H; j += 32) {
    const float xhat = (x[base + j] - m) * r;
    dx[base + j] = (dy[base + j] * gamma[j] - a - xhat * b) * r;
  }
}

// Stage 1: block (column tile, row chunk); each thread owns one column and sums its chunk's rows
// in order. scratch holds [chunks][H] of dgamma partials, then [chunks][H] of dbeta partials.
__global__ void LayerNormBackwardPartialKernel(const float* dy, const float* x, const float* mean,
                                               const float* rstd, float* scratch, int N, int H) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (j >= H) return;
  const int begin = chunk * kRowsPerChunk;
  const int end = min(N, begin + kRowsPerChunk);
  float pg = 0.0f, pb = 0.0f;
  for (int i = begin; i < end; ++i) {
    const size_t k = static_cast<size_t>(i) * H + j;
    const float d = dy[k];
    pg += d * ((x[k] - mean[i]) * rstd[i]);
    pb += d;
  }
  scratch[static_cast<size_t>(chunk) * H + j] = pg;
  scratch[static_cast<size_t>(gridDim.y + chunk) * H + j] = pb;
}

// Stage 2: per column, the chunk partials summed in chunk order, accumulated into dgamma/dbeta.
__global__ void LayerNormBackwardFinalKernel(const float* scratch, float* dgamma, float* dbeta,
                                             int chunks, int H) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= H) return;
  float g = 0.0f, b = 0.0f;
  for (int c = 0; c < chunks; ++c) {
    g += scratch[static_cast<size_t>(c) * H + j];
    b += scratch[static_cast<size_t>(chunks + c) * H + j];
  }
  dgamma[j] += g;
  dbeta[j] += b;
}

}  // namespace

size_t LayerNormBackwardScratchFloats(int N, int H) {
  if (N <= 0 || H <= 0) return 0;
  return 2 * static_cast<size_t>(Chunks(N)) * static_cast<size_t>(H);
}

cudaError_t LayerNormBackward(const float* dy, const float* x, const float* gamma,
                              const float* mean, const float* rstd, float* dx, float* dgamma,
                              float* dbeta, float* scratch, int N, int H, cudaStream_t stream) {
  if (N <= 0 || H <= 0 || scratch == nullptr) return cudaErrorInvalidValue;
  const int chunks = Chunks(N);
  if (chunks > 65535) return cudaErrorInvalidValue;  // grid.y limit: N ≤ 4,194,240 rows
  constexpr int kWarps = 8;
  const double nh = 4.0 * N * H, scratch_bytes = 8.0 * chunks * H;
  // dx: dy, x, gamma, mean, rstd in; dx out. Partial: dy, x, mean, rstd in; the chunk partials
  // out. Final: the partials in, dgamma/dbeta read and written (accumulated).
  DeclareKernelCost({2 * nh + 4.0 * H + 8.0 * N, nh, 10.0 * N * H});
  LayerNormBackwardDxKernel<<<CeilDiv(N, kWarps), kWarps * 32, 0, stream>>>(dy, x, gamma, mean,
                                                                            rstd, dx, N, H);
  constexpr int kThreads = 128;
  const dim3 grid(CeilDiv(H, kThreads), chunks);
  DeclareKernelCost({2 * nh + 8.0 * N, scratch_bytes, 5.0 * N * H});
  LayerNormBackwardPartialKernel<<<grid, kThreads, 0, stream>>>(dy, x, mean, rstd, scratch, N, H);
  DeclareKernelCost({scratch_bytes + 8.0 * H, 8.0 * H, 2.0 * chunks * H});
  LayerNormBackwardFinalKernel<<<CeilDiv(H, kThreads), kThreads, 0, stream>>>(scratch, dgamma,
                                                                              dbeta, chunks, H);
  return cudaGetLastError();
}

cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                             float* mean, float* rstd, int N, int H, float eps,
                             cudaStream_t stream) {
  if (N <= 0 || H <= 0) return cudaErrorInvalidValue;
  constexpr int kWarps = 8;
  const int blocks = CeilDiv(N, kWarps);
  // x, gamma, beta in; y, mean, rstd out.
  DeclareKernelCost({4.0 * N * H + 8.0 * H, 4.0 * N * H + 8.0 * N, 8.0 * N * H});
  LayerNormForwardKernel<<<blocks, kWarps * 32, 0, stream>>>(x, gamma, beta, y, mean, rstd, N, H,
                                                             eps);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
