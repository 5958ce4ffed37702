// Fused AdamW step over the flat fp32 parameter buffer, the formula of AdamW::Step
// (trainer/optim/adamw.cc): decoupled weight decay where decay_mask[i] != 0, bias correction.
#include <cmath>

#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void AdamWStepKernel(float* params, const float* grads, float* m, float* v,
                                const uint8_t* decay_mask, size_t n, float step_size,
                                float bc2_sqrt, float b1, float b2, float eps, float decay) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = grads[i];
    float p = params[i];
    if (decay_mask[i] != 0) p *= decay;
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / bc2_sqrt + eps;
    params[i] = p - step_size * mi / denom;
  }
}

int Blocks(size_t n, int threads) {
  const size_t b = CeilDiv<size_t>(n, threads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

}  // namespace

cudaError_t AdamWStep(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                      const uint8_t* decay_mask, size_t n, int64_t step, double lr, double beta1,
                      double beta2, double eps, double weight_decay, cudaStream_t stream) {
  if (step <= 0 || decay_mask == nullptr) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  // Host scalars computed exactly as AdamW::Step does.
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  // params, grads, both moments and the decay mask byte in; params and moments out.
  DeclareKernelCost({17.0 * n, 12.0 * n, 15.0 * n});
  AdamWStepKernel<<<Blocks(n, 256), 256, 0, stream>>>(
      params, grads, exp_avg, exp_avg_sq, decay_mask, n, step_size, bc2_sqrt,
      static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(eps), decay);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
