// BertForSequenceClassification on a CUDA device: the same forward, loss and backward as the CPU
// model (trainer/model/bert_model.h, its numerical oracle) over the same flat parameter layout,
// with every activation in one device arena, GEMMs through cuBLASLt (gemm.h) and the trainer's
// kernels. The same dropout masks as the CPU for the same seed, so a training step can be
// compared with the CPU engine's element by element. Attention is fused (flash_attention.h: one
// forward launch, two backward, heads read in place from the QKV rows, dropout masks regenerated
// from the counter RNG, no S×S tensor); head dims 1 to 128.
//
// Parameters and gradients are reached unit by unit through UnitAccess<float>, whose pointers
// here are DEVICE pointers (a data-parallel engine can gather a unit just in time and reduce its
// gradients as backward finishes it). Everything is enqueued on the model's stream; the only
// host synchronisation is the read-back of the per-sample losses at the end of Forward (the
// loop needs the loss) and of the logits when asked for.
//
// Letters: B batch, S sequence, H hidden, NH heads, D head dim, I intermediate, C labels,
// N = B·S rows, BH = B·NH.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/bert_config.h"
#include "trainer/cuda/kernels/flash_attention.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/model/autocast.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {

class CudaBertModel {
 public:
  // `gemm` and `stream` must outlive the model. `precision`: the GEMM operands' (autocast.h);
  // bf16/fp16 keep fp32 master weights, activations and elementwise kernels.
  // `gradient_checkpointing` (train.gradient_checkpointing): the arena holds each encoder
  // layer's input and one shared set of layer intermediates; Backward reruns a layer's forward
  // (the same kernels on the same input, the same counter-based dropout masks from the seed)
  // just before its backward. Same results bit for bit, one more forward of compute.
  static absl::StatusOr<std::unique_ptr<CudaBertModel>> Create(
      const BertConfig& config, const ParamLayout& layout, Gemm* gemm, cudaStream_t stream,
      GemmPrecision precision = GemmPrecision::kFp32, bool gradient_checkpointing = false);
  ~CudaBertModel();
  CudaBertModel(const CudaBertModel&) = delete;
  CudaBertModel& operator=(const CudaBertModel&) = delete;

  // Runs the model on the host inputs `in` (copied to the device). With `training`, dropout is
  // active and activations are kept for Backward. Returns the mean loss when labels are given
  // (cross-entropy, or MSE for one label), else 0.
  absl::StatusOr<float> Forward(UnitAccess<float>* access, const BertInputs& in, bool training,
                                uint64_t dropout_seed);
  // One flat device buffer of parameters (layout.total floats).
  absl::StatusOr<float> Forward(const float* params, const BertInputs& in, bool training,
                                uint64_t dropout_seed);

  // grads += loss_weight · ∂(mean loss)/∂params for the last training Forward (enqueued).
  absl::Status Backward(UnitAccess<float>* access, float loss_weight);
  absl::Status Backward(const float* params, float* grads, float loss_weight);

  // Logits (B, C) and per-sample losses (B) of the last Forward, copied to the host.
  absl::StatusOr<std::vector<float>> Logits() const;
  const std::vector<float>& sample_losses() const { return sample_losses_; }

  // The fp32 weights changed (optimizer step, checkpoint load): the 16-bit copies are refreshed
  // before their next use. A no-op in fp32.
  void WeightsChanged() { autocast_->WeightsChanged(); }
  const Autocast& autocast() const { return *autocast_; }

  int num_units() const { return static_cast<int>(unit_begin_.size()); }
  // Bytes of the activation arena (its size for the largest shape seen so far).
  size_t arena_bytes() const { return arena_bytes_; }
  // The arena a Forward of B×S (training: with this config's dropout masks) needs, exactly as
  // Forward would size it; nothing is allocated.
  size_t ArenaBytesFor(int B, int S, bool training) const;
  bool gradient_checkpointing() const { return checkpointing_; }

 private:
  struct LayerActs;  // device pointers into the arena, one layer's saved activations
  struct Buffers;    // every arena pointer for the current shape

  CudaBertModel() = default;
  // Lays out the arena for (B, S), growing it when needed (bert_cuda_arena.cc).
  absl::Status Resize(int B, int S, bool hidden_dropout, bool attention_dropout);
  // Assigns *out's pointers from `base` (null: counts only); returns the bytes used.
  size_t LayOutArena(Buffers* out, char* base, int B, int S, bool hidden_dropout,
                     bool attention_dropout) const;
  const float* P(int index) const;
  float* G(int index) const;
  absl::Status Acquire(UnitAccess<float>* access, int unit, bool grads);
  // Weight `index` as a GEMM operand (its 16-bit copy under bf16/fp16).
  const void* W(int index) const;
  // Linear products through autocast_ with the weight at spec index `w` (gemm.h's meanings).
  absl::Status LinearFwd(const float* x, int w, const float* b, float* y, int64_t rows, int64_t in,
                         int64_t out);
  absl::Status LinearDx(const float* dy, int w, float* dx, int64_t rows, int64_t in, int64_t out,
                        bool accumulate);
  absl::Status LinearDw(const float* dy, const float* x, float* dw, int64_t rows, int64_t in,
                        int64_t out);
  void Release(UnitAccess<float>* access, int unit, bool grads);
  absl::Status LayerForward(int l, float* out, uint64_t dropout_seed);
  absl::Status LayerBackward(int l);
  // Layer l's fused attention (forward; backward builds on it): Q, K, V from its qkv rows, the
  // context into ctx, this layer's attention-dropout site of the step's seed.
  FlashAttentionForwardArgs<float> AttentionArgs(const LayerActs& a, uint64_t dropout_seed,
                                                 int l) const;
  // y = LayerNorm(dropout(y) + residual) into `out`, saving mean/rstd (BertModel's closing step).
  absl::Status DropoutResidualLayerNorm(float* y, float* mask, const float* residual,
                                        const float* gamma, const float* beta, float* mean,
                                        float* rstd, float* out, uint64_t seed);

  BertConfig config_;
  Gemm* gemm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Autocast> autocast_;
  std::vector<size_t> offsets_;     // per spec index
  std::vector<int> unit_of_;        // per spec index
  std::vector<size_t> unit_begin_;  // flat offset of each unit
  std::vector<const float*> unit_params_;
  std::vector<float*> unit_grads_;

  int B_ = 0, S_ = 0;
  bool training_ = false;
  float hidden_p_ = 0, attn_p_ = 0;
  bool has_labels_ = false;
  bool checkpointing_ = false;
  uint64_t dropout_seed_ = 0;  // of the last Forward: the recompute replays its masks

  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::unique_ptr<Buffers> buf_;
  std::vector<float> sample_losses_;
  std::vector<float> host_bias_;  // (N) additive attention bias, staged for upload
};

}  // namespace ringmaster::trainer::cuda
