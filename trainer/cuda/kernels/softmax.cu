// Attention softmax with key-padding bias, forward and backward: one warp per score row.
// Scores are (B·NH) blocks of S×S, block bh = b·NH + h uses bias row b, as the CPU model calls
// cpu::MaskedSoftmaxForward per (batch, head).
#include <cmath>

#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void MaskedSoftmaxForwardKernel(float* scores, const float* bias, size_t rows, int NH,
                                           int S, float scale) {
  const size_t row = blockIdx.x * static_cast<size_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const size_t bh = row / S;
  const float* br = bias + (bh / NH) * S;
  float* r = scores + row * S;
  float mx = -INFINITY;
  for (int j = lane; j < S; j += 32) {
    const float v = r[j] * scale + br[j];
    r[j] = v;
    mx = fmaxf(mx, v);
  }
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int j = lane; j < S; j += 32) {
    const float e = expf(r[j] - mx);
    r[j] = e;
    sum += e;
  }
  const float inv = 1.0f / WarpSum(sum);
  for (int j = lane; j < S; j += 32) r[j] *= inv;
}

__global__ void MaskedSoftmaxBackwardKernel(const float* probs, float* dprobs, size_t rows, int S,
                                            float scale) {
  const size_t row = blockIdx.x * static_cast<size_t>(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* p = probs + row * S;
  float* d = dprobs + row * S;
  float dot = 0.0f;
  for (int j = lane; j < S; j += 32) dot += p[j] * d[j];
  dot = WarpSum(dot);
  for (int j = lane; j < S; j += 32) d[j] = p[j] * (d[j] - dot) * scale;
}

constexpr int kWarps = 8;

bool RowGrid(size_t rows, unsigned* blocks) {
  const size_t b = CeilDiv<size_t>(rows, kWarps);
  if (b == 0 || b > 0x7fffffffu) return false;
  *blocks = static_cast<unsigned>(b);
  return true;
}

}  // namespace

cudaError_t MaskedSoftmaxForward(float* scores, const float* bias, int B, int NH, int S,
                                 float scale, cudaStream_t stream) {
  if (B <= 0 || NH <= 0 || S <= 0) return cudaErrorInvalidValue;
  const size_t rows = static_cast<size_t>(B) * NH * S;
  unsigned blocks = 0;
  if (!RowGrid(rows, &blocks)) return cudaErrorInvalidValue;
  // Scores in place; the (B, S) bias rows.
  DeclareKernelCost({4.0 * rows * S + 4.0 * B * S, 4.0 * rows * S, 5.0 * rows * S});
  MaskedSoftmaxForwardKernel<<<blocks, kWarps * 32, 0, stream>>>(scores, bias, rows, NH, S, scale);
  return cudaGetLastError();
}

cudaError_t MaskedSoftmaxBackward(const float* probs, float* dprobs, int B, int NH, int S,
                                  float scale, cudaStream_t stream) {
  if (B <= 0 || NH <= 0 || S <= 0) return cudaErrorInvalidValue;
  const size_t rows = static_cast<size_t>(B) * NH * S;
  unsigned blocks = 0;
  if (!RowGrid(rows, &blocks)) return cudaErrorInvalidValue;
  DeclareKernelCost({8.0 * rows * S, 4.0 * rows * S, 4.0 * rows * S});
  MaskedSoftmaxBackwardKernel<<<blocks, kWarps * 32, 0, stream>>>(probs, dprobs, rows, S, scale);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
