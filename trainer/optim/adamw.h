// AdamW as torch.optim.AdamW (decoupled weight decay, bias correction), over the flat fp32
// parameter buffer; weight decay only on the specs that ask for it (not biases or LayerNorm).
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// A run of elements sharing one weight-decay setting.
struct AdamWRange {
  size_t begin, end;
  bool decay;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, AdamWOptions options);
  // Over an arbitrary buffer of `n` elements (e.g. one rank's shard); elements outside every
  // range (shard padding) are left alone.
  AdamW(std::vector<AdamWRange> ranges, size_t n, AdamWOptions options);

  // One update with learning rate `lr`; increments step().
  void Step(float* params, const float* grads, double lr);

  int64_t step() const { return step_; }
  void set_step(int64_t s) { step_ = s; }
  std::vector<float>& exp_avg() { return m_; }
  std::vector<float>& exp_avg_sq() { return v_; }
  const std::vector<float>& exp_avg() const { return m_; }
  const std::vector<float>& exp_avg_sq() const { return v_; }

 private:
  std::vector<AdamWRange> ranges_;
  AdamWOptions opt_;
  std::vector<float> m_, v_;
  int64_t step_ = 0;
};

// Global L2 norm of the gradients (accumulated in double).
double GradNorm(const float* grads, size_t n);

// torch.nn.utils.clip_grad_norm_: scales by max_norm / (norm + 1e-6) when that is < 1.
// Returns the norm before clipping. max_norm <= 0 disables clipping.
double ClipGradNorm(float* grads, size_t n, double max_norm);

}  // namespace ringmaster::trainer
