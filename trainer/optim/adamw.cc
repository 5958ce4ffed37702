#include "trainer/optim/adamw.h"

#include <cmath>
#include <utility>

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
  ++step_;
  const double bc1 = 1.0 - std::pow(opt_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(opt_.beta2, static_cast<double>(step_));
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float b1 = static_cast<float>(opt_.beta1), b2 = static_cast<float>(opt_.beta2);
  const float eps = static_cast<float>(opt_.eps);
  for (const AdamWRange& r : ranges_) {
    const float decay = r.decay ? static_cast<float>(1.0 - lr * opt_.weight_decay) : 1.0f;
    float* m = m_.data();
    float* v = v_.data();
#pragma omp parallel for simd schedule(static)
    for (size_t i = r.begin; i < r.end; ++i) {
      const float g = grads[i];
      params[i] *= decay;
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      params[i] -= step_size * m[i] / denom;
    }
  }
}

double GradNorm(const float* grads, size_t n) {
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  return std::sqrt(sum);
}

double ClipGradNorm(float* grads, size_t n, double max_norm) {
  const double norm = GradNorm(grads, n);
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) grads[i] *= c;
  }
  return norm;
}

}  // namespace ringmaster::trainer
