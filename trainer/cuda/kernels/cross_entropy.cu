// Classification loss of BertForSequenceClassification, as BertModel::Forward/Backward:
// cross-entropy with integer labels (stored as floats) for C > 1, squared error for C == 1.
// One thread per sample (C is small). The mean over the batch is left to the caller.
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void LossForwardKernel(const float* logits, const float* labels, float* losses, int B,
                                  int C) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  const float* z = logits + static_cast<size_t>(b) * C;
  if (C == 1) {
    const float d = z[0] - labels[b];
    losses[b] = d * d;
    return;
  }
  float mx = z[0];
  for (int c = 1; c < C; ++c) mx = fmaxf(mx, z[c]);
  float sum = 0.0f;
  for (int c = 0; c < C; ++c) sum += expf(z[c] - mx);
  losses[b] = logf(sum) + mx - z[static_cast<int>(labels[b])];
}

__global__ void LossBackwardKernel(const float* logits, const float* labels, float* dlogits, int B,
                                   int C, float loss_weight) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  const float* z = logits + static_cast<size_t>(b) * C;
  float* dz = dlogits + static_cast<size_t>(b) * C;
  const float fb = static_cast<float>(B);
  if (C == 1) {
    dz[0] = 2.0f * (z[0] - labels[b]) * loss_weight / fb;
    return;
  }
  float mx = z[0];
  for (int c = 1; c < C; ++c) mx = fmaxf(mx, z[c]);
  float sum = 0.0f;
  for (int c = 0; c < C; ++c) sum += expf(z[c] - mx);
  for (int c = 0; c < C; ++c) dz[c] = expf(z[c] - mx) / sum * loss_weight / fb;
  dz[static_cast<int>(labels[b])] -= loss_weight / fb;
}

}  // namespace

cudaError_t ClassificationLossForward(const float* logits, const float* labels, float* losses,
                                      int B, int C, cudaStream_t stream) {
  if (B <= 0 || C <= 0) return cudaErrorInvalidValue;
  DeclareKernelCost({4.0 * B * C + 4.0 * B, 4.0 * B, 4.0 * B * C});
  LossForwardKernel<<<(B + 127) / 128, 128, 0, stream>>>(logits, labels, losses, B, C);
  return cudaGetLastError();
}

cudaError_t ClassificationLossBackward(const float* logits, const float* labels, float* dlogits,
                                       int B, int C, float loss_weight, cudaStream_t stream) {
  if (B <= 0 || C <= 0) return cudaErrorInvalidValue;
  // logits and labels in; dlogits out, the label's element read back (C > 1) for its -= .
  DeclareKernelCost({4.0 * B * C + 4.0 * B + (C > 1 ? 4.0 * B : 0.0), 4.0 * B * C, 4.0 * B * C});
  LossBackwardKernel<<<(B + 127) / 128, 128, 0, stream>>>(logits, labels, dlogits, B, C,
                                                          loss_weight);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
