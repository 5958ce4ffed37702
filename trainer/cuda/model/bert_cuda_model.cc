#include "trainer/cuda/model/bert_cuda_model.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/bias_grad.h"
#include "trainer/cuda/kernels/flash_attention.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/model/bert_cuda_buffers.h"
#include "trainer/model/bert_spec_index.h"

namespace ringmaster::trainer::cuda {
namespace {

// The layout's spec indices and dropout streams (bert_spec_index.h).
using bert_spec::kAoB;
using bert_spec::kAoW;
using bert_spec::kClsB;
using bert_spec::kClsW;
using bert_spec::kEmbCount;
using bert_spec::kEmbLnB;
using bert_spec::kEmbLnW;
using bert_spec::kInB;
using bert_spec::kInW;
using bert_spec::kLayerCount;
using bert_spec::kLn1B;
using bert_spec::kLn1W;
using bert_spec::kLn2B;
using bert_spec::kLn2W;
using bert_spec::kOutB;
using bert_spec::kOutW;
using bert_spec::kPoolB;
using bert_spec::kPoolW;
using bert_spec::kPos;
using bert_spec::kQB;
using bert_spec::kQW;
using bert_spec::kType;
using bert_spec::kWord;
using bert_spec::LayerIndex;
using bert_spec::SiteSeed;

#define RM_KERNEL(call) RM_CUDA_RETURN_IF_ERROR(call)

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBertModel>> CudaBertModel::Create(
    const BertConfig& config, const ParamLayout& layout, Gemm* gemm, cudaStream_t stream,
    GemmPrecision precision, bool gradient_checkpointing) {
  if (gemm == nullptr) return absl::InvalidArgumentError("CudaBertModel: no GEMM");
  if (config.hidden_size % config.num_attention_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CudaBertModel: hidden_size %d is not a multiple of num_attention_heads %d",
                        config.hidden_size, config.num_attention_heads));
  }
  if (!FlashAttentionSupported(config.head_dim())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaBertModel: head dim %d (hidden_size / num_attention_heads) is not supported by the "
        "fused attention (1 to 128)",
        config.head_dim()));
  }
  std::unique_ptr<CudaBertModel> m(new CudaBertModel());
  m->config_ = config;
  m->gemm_ = gemm;
  m->stream_ = stream;
  m->checkpointing_ = gradient_checkpointing;
  for (const ParamSpec& s : layout.specs) {
    m->offsets_.push_back(s.offset);
    m->unit_of_.push_back(s.unit);
    if (s.unit >= static_cast<int>(m->unit_begin_.size()))
      m->unit_begin_.resize(s.unit + 1, s.offset);
  }
  RM_ASSIGN_OR_RETURN(m->autocast_,
                      Autocast::Create(precision, m->unit_begin_, layout.total, stream));
  m->unit_params_.assign(m->unit_begin_.size(), nullptr);
  m->unit_grads_.assign(m->unit_begin_.size(), nullptr);
  m->buf_ = std::make_unique<Buffers>();
  return m;
}

CudaBertModel::~CudaBertModel() {
  if (arena_ != nullptr) cudaFree(arena_);
}

const float* CudaBertModel::P(int index) const {
  const int u = unit_of_[index];
  return unit_params_[u] + (offsets_[index] - unit_begin_[u]);
}

float* CudaBertModel::G(int index) const {
  const int u = unit_of_[index];
  return unit_grads_[u] + (offsets_[index] - unit_begin_[u]);
}

absl::Status CudaBertModel::Acquire(UnitAccess<float>* access, int unit, bool grads) {
  unit_params_[unit] = access->AcquireParams(unit);
  if (grads) unit_grads_[unit] = access->AcquireGrads(unit);
  // Unit 0 (the embeddings) feeds no GEMM: its tables are never cast.
  return unit == 0 ? absl::OkStatus() : autocast_->PrepareUnit(unit, unit_params_[unit]);
}

const void* CudaBertModel::W(int index) const {
  return autocast_->Weight(P(index), offsets_[index]);
}

absl::Status CudaBertModel::LinearFwd(const float* x, int w, const float* b, float* y, int64_t rows,
                                      int64_t in, int64_t out) {
  GemmProblem p = Gemm::LinearForwardProblem(x, W(w), CUDA_R_32F, b, y, rows, in, out);
  p.b.type = autocast_->type();
  return autocast_->Run(p, gemm_);
}

absl::Status CudaBertModel::LinearDx(const float* dy, int w, float* dx, int64_t rows, int64_t in,
                                     int64_t out, bool accumulate) {
  GemmProblem p = Gemm::LinearInputGradProblem(dy, W(w), CUDA_R_32F, dx, rows, in, out, accumulate);
  p.b.type = autocast_->type();
  return autocast_->Run(p, gemm_);
}

absl::Status CudaBertModel::LinearDw(const float* dy, const float* x, float* dw, int64_t rows,
                                     int64_t in, int64_t out) {
  return autocast_->Run(Gemm::LinearWeightGradProblem(dy, x, CUDA_R_32F, dw, rows, in, out), gemm_);
}

void CudaBertModel::Release(UnitAccess<float>* access, int unit, bool grads) {
  if (grads) {
    access->GradsDone(unit);
    unit_grads_[unit] = nullptr;
  }
  access->ReleaseParams(unit);
  unit_params_[unit] = nullptr;
}

absl::StatusOr<float> CudaBertModel::Forward(const float* params, const BertInputs& in,
                                             bool training, uint64_t dropout_seed) {
  FlatUnitAccess<float> access(unit_begin_, params, nullptr);
  return Forward(&access, in, training, dropout_seed);
}

absl::Status CudaBertModel::Backward(const float* params, float* grads, float loss_weight) {
  FlatUnitAccess<float> access(unit_begin_, params, grads);
  return Backward(&access, loss_weight);
}

absl::Status CudaBertModel::DropoutResidualLayerNorm(float* y, float* mask, const float* residual,
                                                     const float* gamma, const float* beta,
                                                     float* mean, float* rstd, float* out,
                                                     uint64_t seed) {
  const size_t n = static_cast<size_t>(B_) * S_ * config_.hidden_size;
  RM_KERNEL(DropoutForward(y, mask, n, hidden_p_, seed, stream_));
  RM_KERNEL(AddInPlace(y, residual, n, stream_));
  RM_KERNEL(LayerNormForward(y, gamma, beta, out, mean, rstd, B_ * S_, config_.hidden_size,
                             config_.layer_norm_eps, stream_));
  return absl::OkStatus();
}

FlashAttentionForwardArgs<float> CudaBertModel::AttentionArgs(const LayerActs& a,
                                                              uint64_t dropout_seed, int l) const {
  const int H = config_.hidden_size, D = config_.head_dim();
  FlashAttentionForwardArgs<float> f;
  f.q = a.qkv, f.k = a.qkv + H, f.v = a.qkv + 2 * H, f.ld_qkv = 3 * H;
  f.mask_bias = buf_->mask_bias;
  f.out = a.ctx, f.ld_out = H, f.stats = a.attn_stats;
  f.B = B_, f.S = S_, f.NH = config_.num_attention_heads, f.D = D;
  f.scale = 1.0f / std::sqrt(static_cast<float>(D));
  // The CPU model's per-(batch, head) streams of this layer's site (bert_spec_index.h).
  f.dropout_p = attn_p_, f.seed = SiteSeed(dropout_seed, l + 1, 1);
  return f;
}

absl::Status CudaBertModel::LayerForward(int l, float* out, uint64_t dropout_seed) {
  Buffers& b = *buf_;
  LayerActs& a = b.layers[l];
  const int B = B_, S = S_, H = config_.hidden_size, I = config_.intermediate_size;
  const int64_t N = static_cast<int64_t>(B) * S;
  // Q, K, V: one [3H, H] projection (the three weights and biases are adjacent) into (N, 3H)
  // rows; the fused attention reads its heads in place and writes the context as (N, H) rows.
  RM_RETURN_IF_ERROR(LinearFwd(a.x, LayerIndex(l, kQW), P(LayerIndex(l, kQB)), a.qkv, N, H, 3 * H));
  RM_KERNEL(FlashAttentionForward(AttentionArgs(a, dropout_seed, l), stream_));
  // Attention output dense → dropout → residual → LayerNorm.
  RM_RETURN_IF_ERROR(
      LinearFwd(a.ctx, LayerIndex(l, kAoW), P(LayerIndex(l, kAoB)), a.ln1_in, N, H, H));
  RM_RETURN_IF_ERROR(DropoutResidualLayerNorm(a.ln1_in, a.attn_mask, a.x, P(LayerIndex(l, kLn1W)),
                                              P(LayerIndex(l, kLn1B)), a.ln1_mean, a.ln1_rstd, a.h1,
                                              SiteSeed(dropout_seed, l + 1, 2)));
  // Feed-forward: dense → exact GELU → dense → dropout → residual → LayerNorm.
  RM_RETURN_IF_ERROR(LinearFwd(a.h1, LayerIndex(l, kInW), P(LayerIndex(l, kInB)), a.u, N, H, I));
  RM_KERNEL(GeluForward(a.u, a.g, static_cast<size_t>(N) * I, stream_));
  RM_RETURN_IF_ERROR(
      LinearFwd(a.g, LayerIndex(l, kOutW), P(LayerIndex(l, kOutB)), a.ln2_in, N, I, H));
  return DropoutResidualLayerNorm(a.ln2_in, a.ffn_mask, a.h1, P(LayerIndex(l, kLn2W)),
                                  P(LayerIndex(l, kLn2B)), a.ln2_mean, a.ln2_rstd, out,
                                  SiteSeed(dropout_seed, l + 1, 3));
}

absl::StatusOr<float> CudaBertModel::Forward(UnitAccess<float>* access, const BertInputs& in,
                                             bool training, uint64_t dropout_seed) {
  const int B = in.batch, S = in.seq;
  const int H = config_.hidden_size, C = config_.num_labels, L = config_.num_hidden_layers;
  if (B <= 0 || S <= 0 || in.input_ids == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("CudaBertModel::Forward: empty batch (B=%d, S=%d)", B, S));
  }
  const size_t N = static_cast<size_t>(B) * S;
  training_ = training;
  dropout_seed_ = dropout_seed;
  hidden_p_ = training ? config_.hidden_dropout_prob : 0.0f;
  attn_p_ = training ? config_.attention_probs_dropout_prob : 0.0f;
  RM_RETURN_IF_ERROR(Resize(B, S, hidden_p_ > 0, attn_p_ > 0));
  Buffers& b = *buf_;

  // Inputs: ids, types (zeros when absent), the additive key-padding bias, labels.
  RM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(b.ids, in.input_ids, N * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  if (in.token_type_ids != nullptr) {
    RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.types, in.token_type_ids, N * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, stream_));
  } else {
    RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.types, 0, N * sizeof(int32_t), stream_));
  }
  host_bias_.resize(N);
  const float neg = std::numeric_limits<float>::lowest();
  for (size_t i = 0; i < N; ++i) {
    const float m = in.attention_mask != nullptr ? in.attention_mask[i] : 1.0f;
    host_bias_[i] = (1.0f - m) * neg;
  }
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.mask_bias, host_bias_.data(), N * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_));
  has_labels_ = in.labels != nullptr;
  if (has_labels_) {
    RM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b.labels, in.labels, B * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }

  // Embeddings: word + position + token type → LayerNorm → dropout.
  RM_RETURN_IF_ERROR(Acquire(access, 0, false));
  RM_KERNEL(
      EmbeddingForward(b.ids, b.types, P(kWord), P(kPos), P(kType), b.emb_sum, B, S, H, stream_));
  LayerActs& first = b.layers[0];
  RM_KERNEL(LayerNormForward(b.emb_sum, P(kEmbLnW), P(kEmbLnB), first.x, b.emb_mean, b.emb_rstd,
                             static_cast<int>(N), H, config_.layer_norm_eps, stream_));
  RM_KERNEL(
      DropoutForward(first.x, b.emb_mask, N * H, hidden_p_, SiteSeed(dropout_seed, 0, 0), stream_));
  Release(access, 0, false);

  for (int l = 0; l < L; ++l) {
    RM_RETURN_IF_ERROR(Acquire(access, l + 1, false));
    float* out = l + 1 < L ? b.layers[l + 1].x : b.final_out;
    RM_RETURN_IF_ERROR(LayerForward(l, out, dropout_seed));
    Release(access, l + 1, false);
  }

  // Pooler on [CLS] (row 0 of each sequence: rows S·H apart) → tanh → dropout → classifier.
  RM_RETURN_IF_ERROR(Acquire(access, L + 1, false));
  const int head = kEmbCount + kLayerCount * L;
  GemmProblem pool;
  pool.M = B, pool.N = H, pool.K = H;
  pool.a = {b.final_out, CUDA_R_32F, false, static_cast<int64_t>(S) * H, 0};
  pool.b = {W(head + kPoolW), autocast_->type(), true, H, 0};
  pool.c = b.pooled, pool.ldc = H, pool.bias = P(head + kPoolB);
  RM_RETURN_IF_ERROR(autocast_->Run(pool, gemm_));
  RM_KERNEL(TanhForward(b.pooled, b.pooled, static_cast<size_t>(B) * H, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.pooled_d, b.pooled, sizeof(float) * B * H,
                                          cudaMemcpyDeviceToDevice, stream_));
  RM_KERNEL(DropoutForward(b.pooled_d, b.pooled_mask, static_cast<size_t>(B) * H, hidden_p_,
                           SiteSeed(dropout_seed, L + 1, 4), stream_));
  RM_RETURN_IF_ERROR(LinearFwd(b.pooled_d, head + kClsW, P(head + kClsB), b.logits, B, H, C));
  Release(access, L + 1, false);

  sample_losses_.clear();
  if (!has_labels_) return 0.0f;
  RM_KERNEL(ClassificationLossForward(b.logits, b.labels, b.losses, B, C, stream_));
  sample_losses_.resize(B);
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sample_losses_.data(), b.losses, B * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  float total = 0.0f;  // in sample order, as the CPU model sums
  for (float loss : sample_losses_) total += loss;
  return total / B;
}

absl::Status CudaBertModel::LayerBackward(int l) {
  Buffers& b = *buf_;
  LayerActs& a = b.layers[l];
  const int B = B_, S = S_, H = config_.hidden_size, I = config_.intermediate_size;
  const int64_t N = static_cast<int64_t>(B) * S;
  const size_t NHsz = static_cast<size_t>(N) * H;
  const int n = static_cast<int>(N);
  auto copy = [&](float* dst, const float* src) {
    return cudaMemcpyAsync(dst, src, NHsz * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
  };
  // Output LayerNorm: dA (d out) → dB (d ln2_in); ln2_in = dropout(ffn) + h1.
  RM_KERNEL(LayerNormBackward(b.dA, a.ln2_in, P(LayerIndex(l, kLn2W)), a.ln2_mean, a.ln2_rstd, b.dB,
                              G(LayerIndex(l, kLn2W)), G(LayerIndex(l, kLn2B)), b.ln_scratch, n, H,
                              stream_));
  RM_KERNEL(copy(b.dA, b.dB));  // d h1 through the residual
  RM_KERNEL(copy(b.dC, b.dB));
  RM_KERNEL(DropoutBackward(b.dC, a.ffn_mask, NHsz, hidden_p_, stream_));
  // FFN out dense: dI = dC·W, dW += dCᵀ·g, db += Σ dC.
  RM_RETURN_IF_ERROR(LinearDx(b.dC, LayerIndex(l, kOutW), b.dI, N, I, H,
                              /*accumulate=*/false));
  RM_RETURN_IF_ERROR(LinearDw(b.dC, a.g, G(LayerIndex(l, kOutW)), N, I, H));
  RM_KERNEL(BiasGradient(b.dC, G(LayerIndex(l, kOutB)), b.bias_scratch, n, H, true, stream_));
  RM_KERNEL(GeluBackward(b.dI, a.u, b.dI, static_cast<size_t>(N) * I, stream_));
  // FFN in dense: dA += dI·W.
  RM_RETURN_IF_ERROR(LinearDx(b.dI, LayerIndex(l, kInW), b.dA, N, H, I,
                              /*accumulate=*/true));
  RM_RETURN_IF_ERROR(LinearDw(b.dI, a.h1, G(LayerIndex(l, kInW)), N, H, I));
  RM_KERNEL(BiasGradient(b.dI, G(LayerIndex(l, kInB)), b.bias_scratch, n, I, true, stream_));
  // Attention LayerNorm: dA (d h1) → dB (d ln1_in); ln1_in = dropout(attn dense) + x.
  RM_KERNEL(LayerNormBackward(b.dA, a.ln1_in, P(LayerIndex(l, kLn1W)), a.ln1_mean, a.ln1_rstd, b.dB,
                              G(LayerIndex(l, kLn1W)), G(LayerIndex(l, kLn1B)), b.ln_scratch, n, H,
                              stream_));
  RM_KERNEL(copy(b.dA, b.dB));  // residual into dx
  RM_KERNEL(DropoutBackward(b.dB, a.attn_mask, NHsz, hidden_p_, stream_));
  RM_RETURN_IF_ERROR(LinearDx(b.dB, LayerIndex(l, kAoW), b.dC, N, H, H,
                              /*accumulate=*/false));
  RM_RETURN_IF_ERROR(LinearDw(b.dB, a.ctx, G(LayerIndex(l, kAoW)), N, H, H));
  RM_KERNEL(BiasGradient(b.dB, G(LayerIndex(l, kAoB)), b.bias_scratch, n, H, true, stream_));

  // Attention: dC is d ctx (rows); dQ, dK, dV straight into the (N, 3H) rows of dqkv.
  const FlashAttentionForwardArgs<float> f = AttentionArgs(a, dropout_seed_, l);
  FlashAttentionBackwardArgs<float> g;
  g.q = f.q, g.k = f.k, g.v = f.v, g.ld_qkv = f.ld_qkv, g.mask_bias = f.mask_bias;
  g.out = a.ctx, g.dout = b.dC, g.ld_out = H, g.stats = a.attn_stats, g.dsum = b.attn_dsum;
  g.dq = b.dqkv, g.dk = b.dqkv + H, g.dv = b.dqkv + 2 * H, g.ld_dqkv = 3 * H;
  g.B = f.B, g.S = f.S, g.NH = f.NH, g.D = f.D, g.scale = f.scale, g.dropout_p = f.dropout_p;
  g.seed = f.seed;
  RM_KERNEL(FlashAttentionBackward(g, stream_));
  // QKV projection ([3H, H] weight, [3H] bias): dA += dqkv·W.
  RM_RETURN_IF_ERROR(LinearDx(b.dqkv, LayerIndex(l, kQW), b.dA, N, H, 3 * H,
                              /*accumulate=*/true));
  RM_RETURN_IF_ERROR(LinearDw(b.dqkv, a.x, G(LayerIndex(l, kQW)), N, H, 3 * H));
  RM_KERNEL(BiasGradient(b.dqkv, G(LayerIndex(l, kQB)), b.bias_scratch, n, 3 * H, true, stream_));
  return absl::OkStatus();
}

absl::Status CudaBertModel::Backward(UnitAccess<float>* access, float loss_weight) {
  if (!training_ || !has_labels_) {
    return absl::FailedPreconditionError(
        "CudaBertModel::Backward needs a training Forward with labels first");
  }
  Buffers& b = *buf_;
  const int B = B_, S = S_, H = config_.hidden_size, C = config_.num_labels;
  const int L = config_.num_hidden_layers;
  const size_t N = static_cast<size_t>(B) * S;
  const int head = kEmbCount + kLayerCount * L;

  RM_KERNEL(ClassificationLossBackward(b.logits, b.labels, b.dlogits, B, C, loss_weight, stream_));
  RM_RETURN_IF_ERROR(Acquire(access, L + 1, true));
  // Classifier: dpooled = dlogits·W; dW += dlogitsᵀ·pooled_d; db += Σ dlogits.
  RM_RETURN_IF_ERROR(LinearDx(b.dlogits, head + kClsW, b.dpooled, B, H, C,
                              /*accumulate=*/false));
  RM_RETURN_IF_ERROR(LinearDw(b.dlogits, b.pooled_d, G(head + kClsW), B, H, C));
  RM_KERNEL(BiasGradient(b.dlogits, G(head + kClsB), b.bias_scratch, B, C, true, stream_));
  RM_KERNEL(
      DropoutBackward(b.dpooled, b.pooled_mask, static_cast<size_t>(B) * H, hidden_p_, stream_));
  RM_KERNEL(TanhBackward(b.dpooled, b.pooled, b.dpooled, static_cast<size_t>(B) * H, stream_));
  // Pooler dense on the [CLS] rows: its input gradient lands on rows b·S of dA (zero elsewhere).
  RM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(b.dA, 0, N * H * sizeof(float), stream_));
  GemmProblem dx;
  dx.M = B, dx.N = H, dx.K = H;
  dx.a = {b.dpooled, CUDA_R_32F, false, H, 0};
  dx.b = {W(head + kPoolW), autocast_->type(), false, H, 0};
  dx.c = b.dA, dx.ldc = static_cast<int64_t>(S) * H;
  RM_RETURN_IF_ERROR(autocast_->Run(dx, gemm_));
  GemmProblem dw;
  dw.M = H, dw.N = H, dw.K = B, dw.beta = 1.0f;
  dw.a = {b.dpooled, CUDA_R_32F, true, H, 0};
  dw.b = {b.final_out, CUDA_R_32F, false, static_cast<int64_t>(S) * H, 0};
  dw.c = G(head + kPoolW), dw.ldc = H;
  RM_RETURN_IF_ERROR(autocast_->Run(dw, gemm_));
  RM_KERNEL(BiasGradient(b.dpooled, G(head + kPoolB), b.bias_scratch, B, H, true, stream_));
  Release(access, L + 1, true);

  for (int l = L - 1; l >= 0; --l) {
    RM_RETURN_IF_ERROR(Acquire(access, l + 1, true));
    if (checkpointing_) {
      // Forward kept only the layer's input: rerun it into the shared intermediates with the
      // same seed (same masks). Its output equals layers[l + 1].x and is not needed again.
      RM_RETURN_IF_ERROR(LayerForward(l, b.recompute_out, dropout_seed_));
    }
    RM_RETURN_IF_ERROR(LayerBackward(l));
    Release(access, l + 1, true);
  }

  // Embeddings: dropout → LayerNorm → scatter into the three tables.
  RM_RETURN_IF_ERROR(Acquire(access, 0, true));
  RM_KERNEL(DropoutBackward(b.dA, b.emb_mask, N * H, hidden_p_, stream_));
  RM_KERNEL(LayerNormBackward(b.dA, b.emb_sum, P(kEmbLnW), b.emb_mean, b.emb_rstd, b.dB, G(kEmbLnW),
                              G(kEmbLnB), b.ln_scratch, static_cast<int>(N), H, stream_));
  RM_KERNEL(EmbeddingBackward(b.dB, b.ids, b.types, G(kWord), G(kPos), G(kType), B, S, H,
                              config_.type_vocab_size, config_.pad_token_id, stream_));
  Release(access, 0, true);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CudaBertModel::Logits() const {
  std::vector<float> out(static_cast<size_t>(B_) * config_.num_labels);
  if (out.empty()) return out;
  RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data(), buf_->logits, out.size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return out;
}

}  // namespace ringmaster::trainer::cuda
