#include "trainer/model/op_profile.h"

#include <omp.h>

namespace ringmaster::trainer::prof {
namespace {

std::atomic<bool> g_enabled{false};
std::array<double, kOpCount> g_seconds{};  // written by the thread that runs the model only
thread_local Scope* t_top = nullptr;

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kGemm:
      return "linear GEMMs";
    case Op::kAttention:
      return "attention (GEMMs+softmax+dropout)";
    case Op::kLayerNorm:
      return "LayerNorm";
    case Op::kGelu:
      return "GELU";
    case Op::kDropout:
      return "dropout + residual";
    case Op::kBiasGrad:
      return "bias gradients";
    case Op::kOptimizer:
      return "clip + AdamW";
    case Op::kEmbedding:
      return "embeddings, pooler, loss";
    case Op::kCount:
      break;
  }
  return "?";
}

void Enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool Enabled() { return g_enabled.load(std::memory_order_relaxed); }

std::array<double, kOpCount> Take() {
  std::array<double, kOpCount> out = g_seconds;
  g_seconds.fill(0.0);
  return out;
}

Scope::Scope(Op op) : op_(op), on_(Enabled() && !omp_in_parallel()) {
  if (!on_) return;
  parent_ = t_top;
  t_top = this;
  start_ = std::chrono::steady_clock::now();
}

Scope::~Scope() {
  if (!on_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  g_seconds[static_cast<int>(op_)] += s - child_s_;
  if (parent_ != nullptr) parent_->child_s_ += s;
  t_top = parent_;
}

}  // namespace ringmaster::trainer::prof
