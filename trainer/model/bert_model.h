// BertForSequenceClassification on the CPU: forward, loss and backward over a flat parameter
// buffer laid out by MakeBertParamLayout. Instantiated for float (training) and double
// (finite-difference gradient checks).
//
// Letters: B batch, S sequence, H hidden, NH heads, D head dim, I intermediate, C labels,
// N = B·S rows.
#pragma once

#include <cstdint>
#include <vector>

#include "jobspec/bert_config.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {

struct BertInputs {
  int batch = 0;
  int seq = 0;
  const int32_t* input_ids = nullptr;       // (B, S)
  const int32_t* token_type_ids = nullptr;  // (B, S); null = all zeros
  const float* attention_mask = nullptr;    // (B, S) 1 = token, 0 = padding; null = all ones
  const float* labels = nullptr;  // (B) class ids (or targets when C == 1); null = no loss
};

// How the model reaches its parameters and gradients one unit at a time (the layout's units:
// 0 embeddings, 1..L encoder layers, L+1 pooler + classifier). A pointer addresses the unit's
// slice of the flat layout from its first element. Forward acquires each unit before use and
// releases it after; Backward does the same in reverse order and calls GradsDone once a unit's
// gradients are final for this backward. Data-parallel engines implement it to gather sharded
// parameters just in time and to reduce gradients while backward continues.
template <typename T>
class UnitAccess {
 public:
  virtual ~UnitAccess() = default;
  virtual const T* AcquireParams(int unit) = 0;  // valid until ReleaseParams(unit)
  virtual void ReleaseParams(int unit) = 0;
  virtual T* AcquireGrads(int unit) = 0;  // Backward accumulates into it
  virtual void GradsDone(int unit) = 0;
};

// The unit accesses of a pass without compute, in the model's order: forward acquires and
// releases every unit; with `begin_backward` (called between the two) a backward follows,
// acquiring parameters and gradients in reverse and reporting each unit's gradients done. A
// data-parallel rank without samples runs it so that it issues the same collectives as its peers.
template <typename T, typename BeginBackward>
void RunUnitsWithoutCompute(UnitAccess<T>& access, int num_units, bool with_backward,
                            BeginBackward begin_backward) {
  for (int u = 0; u < num_units; ++u) {
    access.AcquireParams(u);
    access.ReleaseParams(u);
  }
  if (!with_backward) return;
  begin_backward();
  for (int u = num_units - 1; u >= 0; --u) {
    access.AcquireParams(u);
    access.AcquireGrads(u);
    access.GradsDone(u);
    access.ReleaseParams(u);
  }
}

// The single-process access: one flat buffer each for parameters and gradients (host or device
// memory alike: it only offsets pointers). `unit_begin` is each unit's first flat index.
template <typename T>
class FlatUnitAccess : public UnitAccess<T> {
 public:
  FlatUnitAccess(const std::vector<size_t>& unit_begin, const T* params, T* grads)
      : unit_begin_(unit_begin), params_(params), grads_(grads) {}
  const T* AcquireParams(int unit) override { return params_ + unit_begin_[unit]; }
  void ReleaseParams(int) override {}
  T* AcquireGrads(int unit) override { return grads_ + unit_begin_[unit]; }
  void GradsDone(int) override {}

 private:
  const std::vector<size_t>& unit_begin_;
  const T* params_;
  T* grads_;
};

template <typename T>
class BertModel {
 public:
  // `gradient_checkpointing` (train.gradient_checkpointing): a training Forward keeps only each
  // encoder layer's input; Backward recomputes a layer's forward, with the same dropout masks
  // (counter-based from the seed), just before that layer's backward. Activation memory is one
  // layer's intermediates plus L·N·H instead of L layers' intermediates; the results are the
  // same bit for bit (the recompute runs the same operations on the same inputs).
  BertModel(const BertConfig& config, const ParamLayout& layout,
            bool gradient_checkpointing = false);

  // Runs the model. With `training`, dropout is active (masks derived from `dropout_seed`) and
  // activations are kept for Backward. Returns the mean loss over the batch when labels are
  // given (cross-entropy, or MSE when num_labels == 1), else 0.
  T Forward(const T* params, const BertInputs& in, bool training, uint64_t dropout_seed);
  T Forward(UnitAccess<T>* access, const BertInputs& in, bool training, uint64_t dropout_seed);

  // grads += loss_weight · ∂(mean loss)/∂params, for the last training Forward.
  void Backward(const T* params, T* grads, T loss_weight);
  void Backward(UnitAccess<T>* access, T loss_weight);

  int num_units() const { return static_cast<int>(unit_begin_.size()); }
  bool gradient_checkpointing() const { return checkpointing_; }

  const std::vector<T>& logits() const { return logits_; }  // (B, C)
  // Per-sample losses of the last Forward (B).
  const std::vector<T>& sample_losses() const { return sample_losses_; }

 private:
  // One encoder layer's saved intermediates. Its input lives in inputs_[l]: with gradient
  // checkpointing all layers share work_ instead of one LayerActs each.
  struct LayerActs {
    std::vector<T> qkv;         // (N, 3H)
    std::vector<T> probs;       // (B, NH, S, S) softmax output, before dropout
    std::vector<T> probs_mask;  // (B, NH, S, S) dropout mask (when p > 0)
    std::vector<T> ctx;         // (N, H)
    std::vector<T> attn_mask;   // (N, H) hidden dropout mask after attention output dense
    std::vector<T> ln1_in, ln1_mean, ln1_rstd, h1;  // (N, H), (N), (N), (N, H)
    std::vector<T> u, g;                            // (N, I) pre- and post-GELU
    std::vector<T> ffn_mask;                        // (N, H)
    std::vector<T> ln2_in, ln2_mean, ln2_rstd;      // (N, H), (N), (N)
  };

  // Parameter / gradient `index` (spec index) inside its acquired unit.
  const T* P(int index) const {
    const int u = unit_of_[index];
    return unit_params_[u] + (offsets_[index] - unit_begin_[u]);
  }
  T* G(int index) const {
    const int u = unit_of_[index];
    return unit_grads_[u] + (offsets_[index] - unit_begin_[u]);
  }
  void Acquire(UnitAccess<T>* access, int unit, bool grads);
  void Release(UnitAccess<T>* access, int unit, bool grads);
  void Resize(int B, int S);
  void FitActs(LayerActs* a, size_t N);  // sizes a's buffers for N rows
  LayerActs& Acts(int l) { return checkpointing_ ? work_ : layers_[l]; }
  // Encoder layer l on input x into out (N, H), saving its intermediates in *a.
  void LayerForward(int l, const T* x, LayerActs* a, T* out, uint64_t dropout_seed);
  // dA_ (d out) → dA_ (d x), accumulating layer l's gradients, from Forward's *a.
  void LayerBackward(int l, const T* x, const LayerActs& a);
  // Per (batch, head): scores, masked softmax, dropout, context. Reads a->qkv; writes
  // a->probs, a->probs_mask and a->ctx.
  void AttentionForward(LayerActs* a, bool training, uint64_t seed);
  // y = LayerNorm(dropout(y) + residual), the closing step of both sublayers.
  void DropoutResidualLayerNorm(T* y, T* mask, const T* residual, const T* gamma, const T* beta,
                                T* mean, T* rstd, T* out, uint64_t seed);
  void AttentionBackward(const LayerActs& a, const T* dctx, T* dqkv);

  BertConfig config_;
  std::vector<size_t> offsets_;     // per spec index, in layout order
  std::vector<int> unit_of_;        // per spec index
  std::vector<size_t> unit_begin_;  // flat offset of each unit's first element
  std::vector<const T*> unit_params_;
  std::vector<T*> unit_grads_;
  int B_ = 0, S_ = 0;
  bool training_ = false;
  float hidden_p_ = 0, attn_p_ = 0;
  bool checkpointing_ = false;
  uint64_t dropout_seed_ = 0;  // of the last Forward: the recompute replays its masks

  // Activations.
  std::vector<T> emb_sum_, emb_mean_, emb_rstd_, emb_mask_;  // (N, H), (N), (N), (N, H)
  std::vector<std::vector<T>> inputs_;                       // (L) × (N, H): each layer's input
  std::vector<LayerActs> layers_;  // (L) without checkpointing, else empty
  LayerActs work_;                 // with checkpointing: the layer being run
  std::vector<T> recompute_out_;   // (N, H) with checkpointing: the recompute's output
  std::vector<T> final_;           // (N, H) encoder output
  std::vector<T> cls_, pooled_, pooled_mask_, pooled_d_;  // (B, H)
  std::vector<T> logits_, sample_losses_;                 // (B, C), (B)
  std::vector<T> mask_bias_;                              // (B, S) additive attention bias
  std::vector<int32_t> ids_, types_;
  std::vector<T> labels_;

  // Scratch for backward.
  std::vector<T> dA_, dB_, dC_, dI_, dqkv_;
};

extern template class BertModel<float>;
extern template class BertModel<double>;

}  // namespace ringmaster::trainer
