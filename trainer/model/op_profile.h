// Per-op wall time of the CPU trainer, for `bench_cpu_train --profile`: the model and the
// optimizer open a Scope around each op they run outside a parallel region; a nested scope's
// time is taken out of its parent's, so the categories add up to the time inside scopes. Off
// by default: a disabled Scope costs one relaxed atomic load.
#pragma once

#include <array>
#include <atomic>
#include <chrono>

namespace ringmaster::trainer::prof {

enum class Op {
  kGemm,       // linear layers' GEMMs (forward, dx, dW)
  kAttention,  // per-head score and context GEMMs, masked softmax, attention dropout
  kLayerNorm,  // LayerNorm forward and backward
  kGelu,       // GELU forward and backward
  kDropout,    // hidden dropout and residual adds
  kBiasGrad,   // bias gradients (column sums)
  kOptimizer,  // gradient clipping and AdamW
  kEmbedding,  // embedding gather and scatter, pooler, loss
  kCount
};
inline constexpr int kOpCount = static_cast<int>(Op::kCount);

const char* OpName(Op op);

void Enable(bool on);
bool Enabled();
// Seconds per op since the last Take, then resets them.
std::array<double, kOpCount> Take();

class Scope {
 public:
  explicit Scope(Op op);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Op op_;
  bool on_;
  Scope* parent_ = nullptr;
  double child_s_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ringmaster::trainer::prof
