// CudaBertModel's activation arena: one device allocation laid out per shape (B, S), grown when
// a larger shape comes, never shrunk. With gradient checkpointing the encoder layers share one
// set of intermediates and keep only their inputs (bert_cuda_buffers.h).
#include <algorithm>

#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/bias_grad.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/model/bert_cuda_buffers.h"

namespace ringmaster::trainer::cuda {

size_t CudaBertModel::LayOutArena(Buffers* out, char* base, int B, int S, bool hidden_dropout,
                                  bool /*attention_dropout: regenerated, nothing stored*/) const {
  const size_t H = config_.hidden_size, I = config_.intermediate_size;
  const size_t NH = config_.num_attention_heads, C = config_.num_labels;
  const size_t N = static_cast<size_t>(B) * S, BH = B * NH;
  const size_t scratch_ln =
      LayerNormBackwardScratchFloats(static_cast<int>(N), static_cast<int>(H));
  const size_t scratch_bias =
      BiasGradientScratchFloats(static_cast<int>(N), static_cast<int>(std::max(3 * H, I)));
  // Counting (base null) and assigning run the same sequence of takes.
  size_t used = 0;
  auto take = [&](size_t count, size_t elem = sizeof(float)) -> void* {
    void* p = base == nullptr ? nullptr : base + used;
    used += (count * elem + 255) / 256 * 256;
    return p;
  };
  auto f = [&](size_t count) { return static_cast<float*>(take(count)); };
  Buffers& b = *out;
  b.ids = static_cast<int32_t*>(take(N, sizeof(int32_t)));
  b.types = static_cast<int32_t*>(take(N, sizeof(int32_t)));
  b.mask_bias = f(N);
  b.labels = f(B);
  b.emb_sum = f(N * H);
  b.emb_mean = f(N);
  b.emb_rstd = f(N);
  b.emb_mask = hidden_dropout ? f(N * H) : nullptr;
  b.layers.resize(config_.num_hidden_layers);
  for (size_t l = 0; l < b.layers.size(); ++l) {
    LayerActs& a = b.layers[l];
    a.x = f(N * H);
    if (checkpointing_ && l > 0) {  // layer 0's intermediates, shared
      float* x = a.x;
      a = b.layers[0];
      a.x = x;
      continue;
    }
    a.qkv = f(N * 3 * H);
    a.attn_stats = f(BH * S * 2);
    a.ctx = f(N * H);
    a.attn_mask = hidden_dropout ? f(N * H) : nullptr;
    a.ln1_in = f(N * H);
    a.ln1_mean = f(N);
    a.ln1_rstd = f(N);
    a.h1 = f(N * H);
    a.u = f(N * I);
    a.g = f(N * I);
    a.ffn_mask = hidden_dropout ? f(N * H) : nullptr;
    a.ln2_in = f(N * H);
    a.ln2_mean = f(N);
    a.ln2_rstd = f(N);
  }
  b.final_out = f(N * H);
  b.pooled = f(B * H);
  b.pooled_d = f(B * H);
  b.pooled_mask = hidden_dropout ? f(B * H) : nullptr;
  b.dpooled = f(B * H);
  b.logits = f(B * C);
  b.dlogits = f(B * C);
  b.losses = f(B);
  b.dA = f(N * H);
  b.dB = f(N * H);
  b.dC = f(N * H);
  b.dI = f(N * I);
  b.dqkv = f(N * 3 * H);
  b.attn_dsum = f(BH * S);
  b.ln_scratch = f(scratch_ln);
  b.bias_scratch = f(scratch_bias);
  b.recompute_out = checkpointing_ ? f(N * H) : nullptr;
  return used;
}

size_t CudaBertModel::ArenaBytesFor(int B, int S, bool training) const {
  Buffers scratch;
  return LayOutArena(&scratch, nullptr, B, S, training && config_.hidden_dropout_prob > 0,
                     training && config_.attention_probs_dropout_prob > 0);
}

absl::Status CudaBertModel::Resize(int B, int S, bool hidden_dropout, bool attention_dropout) {
  const size_t need = LayOutArena(buf_.get(), nullptr, B, S, hidden_dropout, attention_dropout);
  if (need > arena_bytes_) {
    if (arena_ != nullptr) {
      RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the old arena may be in use
      RM_CUDA_RETURN_IF_ERROR(cudaFree(arena_));
      arena_ = nullptr;
      arena_bytes_ = 0;
    }
    RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&arena_, need));
    arena_bytes_ = need;
  }
  LayOutArena(buf_.get(), static_cast<char*>(arena_), B, S, hidden_dropout, attention_dropout);
  B_ = B;
  S_ = S;
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer::cuda
