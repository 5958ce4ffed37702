#include "trainer/optim/adamw.h"

#include <cmath>
#include <utility>

#include "trainer/model/cpu_kernels.h"
#include "trainer/model/op_profile.h"

namespace ringmaster::trainer {

AdamW::AdamW(const ParamLayout& layout, AdamWOptions options)
    : opt_(options), m_(layout.total, 0.0f), v_(layout.total, 0.0f) {
  for (const ParamSpec& s : layout.specs) {
    ranges_.push_back({s.offset, s.offset + s.numel, s.weight_decay});
  }
}

AdamW::AdamW(std::vector<AdamWRange> ranges, size_t n, AdamWOptions options)
    : ranges_(std::move(ranges)), opt_(options), m_(n, 0.0f), v_(n, 0.0f) {}

void AdamW::Step(float* params, const float* grads, double lr) {
  prof::Scope scope(prof::Op::kOptimizer);
  ++step_;
  const double bc1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(step_));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2);
  const float eps = static_cast<float>(opt_.eps);
  for (const AdamWRange& r : ranges_) {
    const float decay = r.decay ? static_cast<float>(1.0 - lr * opt_.weight_decay) : 1.0f;
    cpu::ActiveKernels().adamw(params, grads, m_.data(), v_.data(), r.begin, r.end, decay, b1, b2,
                               step_size, bc2_sqrt, eps);
  }
}

double GradNorm(const float* grads, size_t n) {
  return std::sqrt(cpu::ActiveKernels().sum_squares(grads, n));
}

double ClipGradNorm(float* grads, size_t n, double max_norm) {
  prof::Scope scope(prof::Op::kOptimizer);
  const double norm = GradNorm(grads, n);
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    cpu::ActiveKernels().scale(grads, n, static_cast<float>(coef));
  }
  return norm;
}

}  // namespace ringmaster::trainer
