#include "trainer/model/bert_model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "trainer/model/bert_spec_index.h"
#include "trainer/model/cpu_kernels.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/model/op_profile.h"

namespace ringmaster::trainer {
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

}  // namespace

template <typename T>
BertModel<T>::BertModel(const BertConfig& config, const ParamLayout& layout,
                        bool gradient_checkpointing)
    : config_(config), checkpointing_(gradient_checkpointing) {
  offsets_.reserve(layout.specs.size());
  for (const ParamSpec& s : layout.specs) {
    offsets_.push_back(s.offset);
    unit_of_.push_back(s.unit);
    if (s.unit >= static_cast<int>(unit_begin_.size())) {
      // Units are contiguous and in order in the layout (MakeBertParamLayout).
      unit_begin_.resize(s.unit + 1, s.offset);
    }
  }
  unit_params_.assign(unit_begin_.size(), nullptr);
  unit_grads_.assign(unit_begin_.size(), nullptr);
  inputs_.resize(config.num_hidden_layers);
  if (!checkpointing_) layers_.resize(config.num_hidden_layers);
}

template <typename T>
void BertModel<T>::Acquire(UnitAccess<T>* access, int unit, bool grads) {
  unit_params_[unit] = access->AcquireParams(unit);
  if (grads) unit_grads_[unit] = access->AcquireGrads(unit);
}

template <typename T>
void BertModel<T>::Release(UnitAccess<T>* access, int unit, bool grads) {
  if (grads) {
    access->GradsDone(unit);
    unit_grads_[unit] = nullptr;
  }
  access->ReleaseParams(unit);
  unit_params_[unit] = nullptr;
}

template <typename T>
T BertModel<T>::Forward(const T* params, const BertInputs& in, bool training,
                        uint64_t dropout_seed) {
  FlatUnitAccess<T> access(unit_begin_, params, nullptr);
  return Forward(&access, in, training, dropout_seed);
}

template <typename T>
void BertModel<T>::Backward(const T* params, T* grads, T loss_weight) {
  FlatUnitAccess<T> access(unit_begin_, params, grads);
  Backward(&access, loss_weight);
}

template <typename T>
void BertModel<T>::Resize(int B, int S) {
  const size_t H = config_.hidden_size;
  const size_t N = static_cast<size_t>(B) * S;
  B_ = B;
  S_ = S;
  auto fit = [](std::vector<T>& v, size_t n) {
    if (v.size() != n) v.resize(n);
  };
  const bool hp = hidden_p_ > 0;
  fit(emb_sum_, N * H);
  fit(emb_mean_, N);
  fit(emb_rstd_, N);
  fit(emb_mask_, hp ? N * H : 0);
  for (std::vector<T>& x : inputs_) fit(x, N * H);
  for (LayerActs& a : layers_) FitActs(&a, N);
  if (checkpointing_) {
    FitActs(&work_, N);
    fit(recompute_out_, N * H);
  }
  fit(final_, N * H);
  fit(cls_, B * H);
  fit(pooled_, B * H);
  fit(pooled_mask_, hp ? B * H : 0);
  fit(pooled_d_, B * H);
  fit(logits_, static_cast<size_t>(B) * config_.num_labels);
  fit(sample_losses_, B);
  fit(mask_bias_, N);
}

template <typename T>
void BertModel<T>::FitActs(LayerActs* a, size_t N) {
  const size_t H = config_.hidden_size, I = config_.intermediate_size;
  const size_t NH = config_.num_attention_heads;
  const size_t BSS = static_cast<size_t>(B_) * NH * S_ * S_;
  const bool hp = hidden_p_ > 0, ap = attn_p_ > 0;
  auto fit = [](std::vector<T>& v, size_t n) {
    if (v.size() != n) v.resize(n);
  };
  fit(a->qkv, N * 3 * H);
  fit(a->probs, BSS);
  fit(a->probs_mask, ap ? BSS : 0);
  fit(a->ctx, N * H);
  fit(a->attn_mask, hp ? N * H : 0);
  fit(a->ln1_in, N * H);
  fit(a->ln1_mean, N);
  fit(a->ln1_rstd, N);
  fit(a->h1, N * H);
  fit(a->u, N * I);
  fit(a->g, N * I);
  fit(a->ffn_mask, hp ? N * H : 0);
  fit(a->ln2_in, N * H);
  fit(a->ln2_mean, N);
  fit(a->ln2_rstd, N);
}

template <typename T>
void BertModel<T>::AttentionForward(LayerActs* a, bool training, uint64_t seed) {
  prof::Scope scope(prof::Op::kAttention);
  const int S = S_, H = config_.hidden_size, NH = config_.num_attention_heads;
  const int D = config_.head_dim();
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  const bool drop = training && attn_p_ > 0;
#pragma omp parallel
  {
    std::vector<T> pd(drop ? static_cast<size_t>(S) * S : 0);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B_ * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      const T* q = a->qkv.data() + static_cast<size_t>(b) * S * 3 * H + h * D;
      const T* k = q + H;
      const T* v = q + 2 * H;
      T* probs = a->probs.data() + static_cast<size_t>(bh) * S * S;
      cpu::Gemm<T>(false, true, S, S, D, T(1), q, 3 * H, k, 3 * H, T(0), probs, S);
      cpu::MaskedSoftmaxForward<T>(probs, mask_bias_.data() + static_cast<size_t>(b) * S, S, scale);
      const T* p_used = probs;
      if (drop) {
        T* mask = a->probs_mask.data() + static_cast<size_t>(bh) * S * S;
        const T keep_scale = T(1) / (T(1) - T(attn_p_));
        const uint64_t s = cpu::Mix64(seed ^ static_cast<uint64_t>(bh));
        if constexpr (std::is_same_v<T, float>) {
          cpu::ActiveKernels().dropout_probs(probs, mask, pd.data(), pd.size(), attn_p_, s);
        } else {
          for (size_t i = 0; i < pd.size(); ++i) {
            mask[i] = cpu::UniformAt(s, i) >= attn_p_ ? keep_scale : T(0);
            pd[i] = probs[i] * mask[i];
          }
        }
        p_used = pd.data();
      }
      T* ctx = a->ctx.data() + static_cast<size_t>(b) * S * H + h * D;
      cpu::Gemm<T>(false, false, S, D, S, T(1), p_used, S, v, 3 * H, T(0), ctx, H);
    }
  }
}

template <typename T>
void BertModel<T>::AttentionBackward(const LayerActs& a, const T* dctx, T* dqkv) {
  prof::Scope scope(prof::Op::kAttention);
  const int S = S_, H = config_.hidden_size, NH = config_.num_attention_heads;
  const int D = config_.head_dim();
  const T scale = T(1) / std::sqrt(static_cast<T>(D));
  const bool drop = training_ && attn_p_ > 0;
#pragma omp parallel
  {
    std::vector<T> dp(static_cast<size_t>(S) * S);
    std::vector<T> pd(drop ? static_cast<size_t>(S) * S : 0);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B_ * NH; ++bh) {
      const int b = bh / NH, h = bh % NH;
      const size_t row0 = static_cast<size_t>(b) * S;
      const T* q = a.qkv.data() + row0 * 3 * H + h * D;
      const T* k = q + H;
      const T* v = q + 2 * H;
      T* dq = dqkv + row0 * 3 * H + h * D;
      T* dk = dq + H;
      T* dv = dq + 2 * H;
      const T* dc = dctx + row0 * H + h * D;
      const T* probs = a.probs.data() + static_cast<size_t>(bh) * S * S;
      const T* mask = drop ? a.probs_mask.data() + static_cast<size_t>(bh) * S * S : nullptr;
      const T* p_used = probs;
      if (drop) {
        for (size_t i = 0; i < pd.size(); ++i) pd[i] = probs[i] * mask[i];
        p_used = pd.data();
      }
      // dV = P_dᵀ · dctx ; dP_d = dctx · Vᵀ
      cpu::Gemm<T>(true, false, S, D, S, T(1), p_used, S, dc, H, T(0), dv, 3 * H);
      cpu::Gemm<T>(false, true, S, S, D, T(1), dc, H, v, 3 * H, T(0), dp.data(), S);
      if (drop) {
        for (size_t i = 0; i < dp.size(); ++i) dp[i] *= mask[i];
      }
      cpu::MaskedSoftmaxBackward<T>(probs, dp.data(), S, scale);
      // dQ = dS · K ; dK = dSᵀ · Q
      cpu::Gemm<T>(false, false, S, D, S, T(1), dp.data(), S, k, 3 * H, T(0), dq, 3 * H);
      cpu::Gemm<T>(true, false, S, D, S, T(1), dp.data(), S, q, 3 * H, T(0), dk, 3 * H);
    }
  }
}

template <typename T>
void BertModel<T>::DropoutResidualLayerNorm(T* y, T* mask, const T* residual, const T* gamma,
                                            const T* beta, T* mean, T* rstd, T* out,
                                            uint64_t seed) {
  const size_t n = static_cast<size_t>(B_) * S_ * config_.hidden_size;
  prof::Scope scope(prof::Op::kDropout);
  cpu::DropoutForward<T>(y, mask, n, hidden_p_, seed);
  if constexpr (std::is_same_v<T, float>) {
    cpu::ActiveKernels().add(y, residual, n);
  } else {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) y[i] += residual[i];
  }
  cpu::LayerNormForward<T>(y, gamma, beta, out, mean, rstd, B_ * S_, config_.hidden_size,
                           static_cast<T>(config_.layer_norm_eps));
}

template <typename T>
void BertModel<T>::LayerForward(int l, const T* x, LayerActs* a, T* out, uint64_t dropout_seed) {
  const int H = config_.hidden_size, I = config_.intermediate_size;
  const size_t N = static_cast<size_t>(B_) * S_;
  const int n = static_cast<int>(N);
  cpu::LinearForward<T>(x, P(LayerIndex(l, kQW)), P(LayerIndex(l, kQB)), a->qkv.data(), n, H,
                        3 * H);
  AttentionForward(a, training_, SiteSeed(dropout_seed, l + 1, 1));
  // Attention output dense → dropout → residual → LayerNorm.
  cpu::LinearForward<T>(a->ctx.data(), P(LayerIndex(l, kAoW)), P(LayerIndex(l, kAoB)),
                        a->ln1_in.data(), n, H, H);
  DropoutResidualLayerNorm(a->ln1_in.data(), a->attn_mask.data(), x, P(LayerIndex(l, kLn1W)),
                           P(LayerIndex(l, kLn1B)), a->ln1_mean.data(), a->ln1_rstd.data(),
                           a->h1.data(), SiteSeed(dropout_seed, l + 1, 2));
  // Feed-forward: dense → GELU → dense → dropout → residual → LayerNorm.
  cpu::LinearForward<T>(a->h1.data(), P(LayerIndex(l, kInW)), P(LayerIndex(l, kInB)), a->u.data(),
                        n, H, I);
  cpu::GeluForward<T>(a->u.data(), a->g.data(), N * I);
  cpu::LinearForward<T>(a->g.data(), P(LayerIndex(l, kOutW)), P(LayerIndex(l, kOutB)),
                        a->ln2_in.data(), n, I, H);
  DropoutResidualLayerNorm(a->ln2_in.data(), a->ffn_mask.data(), a->h1.data(),
                           P(LayerIndex(l, kLn2W)), P(LayerIndex(l, kLn2B)), a->ln2_mean.data(),
                           a->ln2_rstd.data(), out, SiteSeed(dropout_seed, l + 1, 3));
}

template <typename T>
T BertModel<T>::Forward(UnitAccess<T>* access, const BertInputs& in, bool training,
                        uint64_t dropout_seed) {
  const int B = in.batch, S = in.seq;
  const int H = config_.hidden_size, C = config_.num_labels;
  const size_t N = static_cast<size_t>(B) * S;
  training_ = training;
  dropout_seed_ = dropout_seed;
  hidden_p_ = training ? config_.hidden_dropout_prob : 0.0f;
  attn_p_ = training ? config_.attention_probs_dropout_prob : 0.0f;
  Resize(B, S);

  ids_.assign(in.input_ids, in.input_ids + N);
  if (in.token_type_ids != nullptr) {
    types_.assign(in.token_type_ids, in.token_type_ids + N);
  } else {
    types_.assign(N, 0);
  }
  const T neg = std::numeric_limits<T>::lowest();
  for (size_t i = 0; i < N; ++i) {
    const float m = in.attention_mask != nullptr ? in.attention_mask[i] : 1.0f;
    mask_bias_[i] = (T(1) - T(m)) * neg;
  }

  // Embeddings: word + position + token type → LayerNorm → dropout.
  Acquire(access, 0, false);
  const T* word = P(kWord);
  const T* pos = P(kPos);
  const T* type = P(kType);
  {
    prof::Scope scope(prof::Op::kEmbedding);
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < N; ++r) {
      const int s = static_cast<int>(r % S);
      const T* w = word + static_cast<size_t>(ids_[r]) * H;
      const T* p = pos + static_cast<size_t>(s) * H;
      const T* t = type + static_cast<size_t>(types_[r]) * H;
      T* o = emb_sum_.data() + r * H;
      for (int j = 0; j < H; ++j) o[j] = w[j] + p[j] + t[j];
    }
  }
  T* first = inputs_[0].data();
  cpu::LayerNormForward<T>(emb_sum_.data(), P(kEmbLnW), P(kEmbLnB), first, emb_mean_.data(),
                           emb_rstd_.data(), static_cast<int>(N), H,
                           static_cast<T>(config_.layer_norm_eps));
  cpu::DropoutForward<T>(first, emb_mask_.data(), N * H, hidden_p_, SiteSeed(dropout_seed, 0, 0));

  Release(access, 0, false);

  for (int l = 0; l < config_.num_hidden_layers; ++l) {
    Acquire(access, l + 1, false);
    T* out = l + 1 < config_.num_hidden_layers ? inputs_[l + 1].data() : final_.data();
    LayerForward(l, inputs_[l].data(), &Acts(l), out, dropout_seed);
    Release(access, l + 1, false);
  }

  // Pooler on [CLS] (row 0 of each sequence) → tanh → dropout → classifier.
  prof::Scope head_scope(prof::Op::kEmbedding);
  Acquire(access, config_.num_hidden_layers + 1, false);
  const int head = kEmbCount + kLayerCount * config_.num_hidden_layers;
  for (int b = 0; b < B; ++b) {
    std::copy_n(final_.data() + static_cast<size_t>(b) * S * H, H,
                cls_.data() + static_cast<size_t>(b) * H);
  }
  cpu::LinearForward<T>(cls_.data(), P(head + kPoolW), P(head + kPoolB), pooled_.data(), B, H, H);
  for (T& x : pooled_) x = std::tanh(x);
  pooled_d_ = pooled_;
  cpu::DropoutForward<T>(pooled_d_.data(), pooled_mask_.data(), pooled_d_.size(), hidden_p_,
                         SiteSeed(dropout_seed, config_.num_hidden_layers + 1, 4));
  cpu::LinearForward<T>(pooled_d_.data(), P(head + kClsW), P(head + kClsB), logits_.data(), B, H,
                        C);
  Release(access, config_.num_hidden_layers + 1, false);

  if (in.labels == nullptr) {
    labels_.clear();
    return T(0);
  }
  labels_.assign(in.labels, in.labels + B);
  T total = 0;
  for (int b = 0; b < B; ++b) {
    const T* z = logits_.data() + static_cast<size_t>(b) * C;
    T loss;
    if (C == 1) {
      const T d = z[0] - labels_[b];
      loss = d * d;
    } else {
      const T mx = *std::max_element(z, z + C);
      T sum = 0;
      for (int c = 0; c < C; ++c) sum += std::exp(z[c] - mx);
      loss = std::log(sum) + mx - z[static_cast<int>(labels_[b])];
    }
    sample_losses_[b] = loss;
    total += loss;
  }
  return total / B;
}

template <typename T>
void BertModel<T>::LayerBackward(int l, const T* x, const LayerActs& a) {
  const int H = config_.hidden_size, I = config_.intermediate_size;
  const size_t N = static_cast<size_t>(B_) * S_;
  const int n = static_cast<int>(N);
  const T* empty = nullptr;
  // Output LayerNorm: dA (dout) → dB (d ln2_in). ln2_in = dropout(ffn) + h1.
  cpu::LayerNormBackward<T>(dA_.data(), a.ln2_in.data(), P(LayerIndex(l, kLn2W)), a.ln2_mean.data(),
                            a.ln2_rstd.data(), dB_.data(), G(LayerIndex(l, kLn2W)),
                            G(LayerIndex(l, kLn2B)), n, H);
  // dA ← d h1 (residual part), dC ← d ffn output (through dropout).
  std::copy(dB_.begin(), dB_.end(), dA_.begin());
  std::copy(dB_.begin(), dB_.end(), dC_.begin());
  cpu::DropoutBackward<T>(dC_.data(), hidden_p_ > 0 ? a.ffn_mask.data() : empty, N * H, hidden_p_);
  cpu::LinearBackward<T>(dC_.data(), a.g.data(), P(LayerIndex(l, kOutW)), dI_.data(),
                         G(LayerIndex(l, kOutW)), G(LayerIndex(l, kOutB)), n, I, H);
  cpu::GeluBackward<T>(dI_.data(), a.u.data(), dI_.data(), N * I);
  cpu::LinearBackward<T>(dI_.data(), a.h1.data(), P(LayerIndex(l, kInW)), dA_.data(),
                         G(LayerIndex(l, kInW)), G(LayerIndex(l, kInB)), n, H, I,
                         /*accumulate_dx=*/true);
  // Attention LayerNorm: dA (d h1) → dB (d ln1_in). ln1_in = dropout(attn dense) + x.
  cpu::LayerNormBackward<T>(dA_.data(), a.ln1_in.data(), P(LayerIndex(l, kLn1W)), a.ln1_mean.data(),
                            a.ln1_rstd.data(), dB_.data(), G(LayerIndex(l, kLn1W)),
                            G(LayerIndex(l, kLn1B)), n, H);
  std::copy(dB_.begin(), dB_.end(), dA_.begin());  // residual into dx
  cpu::DropoutBackward<T>(dB_.data(), hidden_p_ > 0 ? a.attn_mask.data() : empty, N * H, hidden_p_);
  cpu::LinearBackward<T>(dB_.data(), a.ctx.data(), P(LayerIndex(l, kAoW)), dC_.data(),
                         G(LayerIndex(l, kAoW)), G(LayerIndex(l, kAoB)), n, H, H);
  AttentionBackward(a, dC_.data(), dqkv_.data());
  // Q, K, V weights and biases are adjacent: one [3H, H] weight and one [3H] bias.
  cpu::LinearBackward<T>(dqkv_.data(), x, P(LayerIndex(l, kQW)), dA_.data(), G(LayerIndex(l, kQW)),
                         G(LayerIndex(l, kQB)), n, H, 3 * H,
                         /*accumulate_dx=*/true);
}

template <typename T>
void BertModel<T>::Backward(UnitAccess<T>* access, T loss_weight) {
  const int B = B_, S = S_;
  const int H = config_.hidden_size, I = config_.intermediate_size, C = config_.num_labels;
  const size_t N = static_cast<size_t>(B) * S;
  const int n = static_cast<int>(N);
  const int head = kEmbCount + kLayerCount * config_.num_hidden_layers;

  // d(loss_weight · mean loss)/d logits.
  std::optional<prof::Scope> head_scope(std::in_place, prof::Op::kEmbedding);
  std::vector<T> dlogits(static_cast<size_t>(B) * C);
  for (int b = 0; b < B; ++b) {
    const T* z = logits_.data() + static_cast<size_t>(b) * C;
    T* dz = dlogits.data() + static_cast<size_t>(b) * C;
    if (C == 1) {
      dz[0] = T(2) * (z[0] - labels_[b]) * loss_weight / B;
    } else {
      const T mx = *std::max_element(z, z + C);
      T sum = 0;
      for (int c = 0; c < C; ++c) sum += std::exp(z[c] - mx);
      for (int c = 0; c < C; ++c) dz[c] = std::exp(z[c] - mx) / sum * loss_weight / B;
      dz[static_cast<int>(labels_[b])] -= loss_weight / B;
    }
  }
  Acquire(access, config_.num_hidden_layers + 1, true);
  std::vector<T> dpooled(static_cast<size_t>(B) * H);
  cpu::LinearBackward<T>(dlogits.data(), pooled_d_.data(), P(head + kClsW), dpooled.data(),
                         G(head + kClsW), G(head + kClsB), B, H, C);
  cpu::DropoutBackward<T>(dpooled.data(), pooled_mask_.data(), dpooled.size(), hidden_p_);
  for (size_t i = 0; i < dpooled.size(); ++i) dpooled[i] *= T(1) - pooled_[i] * pooled_[i];
  std::vector<T> dcls(static_cast<size_t>(B) * H);
  cpu::LinearBackward<T>(dpooled.data(), cls_.data(), P(head + kPoolW), dcls.data(),
                         G(head + kPoolW), G(head + kPoolB), B, H, H);
  Release(access, config_.num_hidden_layers + 1, true);
  head_scope.reset();

  // dX: gradient w.r.t. the current layer's output, (N, H).
  dA_.assign(N * H, T(0));
  dB_.resize(N * H);
  dC_.resize(N * H);
  dI_.resize(N * I);
  dqkv_.resize(N * 3 * H);
  for (int b = 0; b < B; ++b) {
    std::copy_n(dcls.data() + static_cast<size_t>(b) * H, H,
                dA_.data() + static_cast<size_t>(b) * S * H);
  }
  for (int l = config_.num_hidden_layers - 1; l >= 0; --l) {
    Acquire(access, l + 1, true);
    if (checkpointing_) {
      // Forward kept only the input: rerun the layer (same masks from the same seed) into the
      // shared intermediates. Its output equals inputs_[l + 1] and is not needed again.
      LayerForward(l, inputs_[l].data(), &work_, recompute_out_.data(), dropout_seed_);
    }
    LayerBackward(l, inputs_[l].data(), Acts(l));
    Release(access, l + 1, true);
  }

  // Embeddings: dropout → LayerNorm → scatter into the three tables.
  Acquire(access, 0, true);
  prof::Scope emb_scope(prof::Op::kEmbedding);
  cpu::DropoutBackward<T>(dA_.data(), hidden_p_ > 0 ? emb_mask_.data() : nullptr, N * H, hidden_p_);
  cpu::LayerNormBackward<T>(dA_.data(), emb_sum_.data(), P(kEmbLnW), emb_mean_.data(),
                            emb_rstd_.data(), dB_.data(), G(kEmbLnW), G(kEmbLnB), n, H);
  T* gword = G(kWord);
  T* gpos = G(kPos);
  T* gtype = G(kType);
  // Rows are split by hidden column so threads never write the same element.
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int j0 = H * t / nt, j1 = H * (t + 1) / nt;
    for (size_t r = 0; r < N; ++r) {
      const T* d = dB_.data() + r * H;
      const int s = static_cast<int>(r % S);
      // nn.Embedding(padding_idx=pad_token_id): the padding row gets no gradient.
      T* w = ids_[r] == config_.pad_token_id ? nullptr : gword + static_cast<size_t>(ids_[r]) * H;
      T* p = gpos + static_cast<size_t>(s) * H;
      T* ty = gtype + static_cast<size_t>(types_[r]) * H;
      for (int j = j0; j < j1; ++j) {
        if (w != nullptr) w[j] += d[j];
        p[j] += d[j];
        ty[j] += d[j];
      }
    }
  }
  Release(access, 0, true);
}

template class BertModel<float>;
template class BertModel<double>;

}  // namespace ringmaster::trainer
