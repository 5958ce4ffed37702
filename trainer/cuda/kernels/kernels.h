// CUDA kernels of the BERT layers; each has its CPU reference in trainer/model/cpu_ops.h and a
// test against it (label `gpu`). Launchers take a stream, check their shape assumptions and
// return the launch's cudaError_t. The CUDA trainer (issue #3) builds on these.
//
// Letters: N rows (B·S), H hidden, B batch, S sequence, NH heads, C labels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ringmaster::trainer::cuda {

// y = GELU(x), exact erf form.
cudaError_t GeluForward(const float* x, float* y, size_t n, cudaStream_t stream);
// dx = dy · GELU'(x).
cudaError_t GeluBackward(const float* dy, const float* x, float* dx, size_t n, cudaStream_t stream);
// LayerNorm over rows of H, one warp per row; saves mean and rstd (N each).
cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                             float* mean, float* rstd, int N, int H, float eps,
                             cudaStream_t stream);

// Floats of scratch LayerNormBackward needs for (N, H).
size_t LayerNormBackwardScratchFloats(int N, int H);
// dx overwritten, dgamma/dbeta accumulated (deterministic two-stage reduction, no atomics);
// mean/rstd from LayerNormForward; scratch holds LayerNormBackwardScratchFloats(N, H) floats.
cudaError_t LayerNormBackward(const float* dy, const float* x, const float* gamma,
                              const float* mean, const float* rstd, float* dx, float* dgamma,
                              float* dbeta, float* scratch, int N, int H, cudaStream_t stream);

// Attention softmax in place over B·NH blocks of S×S scores: row ← softmax(scale·row + bias[b]),
// block bh = b·NH + h using bias row b of bias (B, S) (additive key-padding bias).
cudaError_t MaskedSoftmaxForward(float* scores, const float* bias, int B, int NH, int S,
                                 float scale, cudaStream_t stream);
// dprobs ← P ⊙ (dP − rowsum(dP ⊙ P)) · scale, over the same B·NH·S rows of S.
cudaError_t MaskedSoftmaxBackward(const float* probs, float* dprobs, int B, int NH, int S,
                                  float scale, cudaStream_t stream);

// Inverted dropout in place with cpu::DropoutForward's counter-based mask (same seed, same mask):
// mask[i] = UniformAt(seed, i) >= p ? 1/(1-p) : 0. p <= 0 → identity, mask untouched; p >= 1
// is rejected (cudaErrorInvalidValue).
cudaError_t DropoutForward(float* x, float* mask, size_t n, float p, uint64_t seed,
                           cudaStream_t stream);
// dx ⊙= mask; p <= 0 → identity.
cudaError_t DropoutBackward(float* dx, const float* mask, size_t n, float p, cudaStream_t stream);
// out[i] = UniformAt(seed, first_index + i) (counter_rng.cuh), for tests and custom masks.
cudaError_t UniformFill(float* out, size_t n, uint64_t seed, uint64_t first_index,
                        cudaStream_t stream);

// One AdamW step (AdamW::Step's formula) over n flat floats; `step` is the step number after
// incrementing (1 for the first). Weight decay where decay_mask[i] != 0.
cudaError_t AdamWStep(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                      const uint8_t* decay_mask, size_t n, int64_t step, double lr, double beta1,
                      double beta2, double eps, double weight_decay, cudaStream_t stream);

// out[B·S, H] = word[id] + pos[s] + type[t] (types null → all 0). ids must be in range.
cudaError_t EmbeddingForward(const int32_t* ids, const int32_t* types, const float* word,
                             const float* pos, const float* type, float* out, int B, int S, int H,
                             cudaStream_t stream);
// Accumulates d (B·S, H) into the tables; the word row pad_id gets no gradient. The word table
// uses atomicAdd, so its last bits may vary between runs; position and type are deterministic.
cudaError_t EmbeddingBackward(const float* d, const int32_t* ids, const int32_t* types,
                              float* gword, float* gpos, float* gtype, int B, int S, int H,
                              int type_vocab, int pad_id, cudaStream_t stream);

// Per-sample loss of logits (B, C) against labels (B, class index stored as float): CE for
// C > 1, squared error for C == 1. Class labels must lie in [0, C) (not checked on the device).
cudaError_t ClassificationLossForward(const float* logits, const float* labels, float* losses,
                                      int B, int C, cudaStream_t stream);
// dlogits = d(loss_weight · mean loss)/d logits (overwrites).
cudaError_t ClassificationLossBackward(const float* logits, const float* labels, float* dlogits,
                                       int B, int C, float loss_weight, cudaStream_t stream);

// Doubles of scratch GradNorm/ClipGradNorm need for n gradients.
size_t GradNormScratchDoubles(size_t n);
// *norm (device) = ‖grads‖₂, sum of squares in double, deterministic.
cudaError_t GradNorm(const float* grads, size_t n, double* scratch, double* norm,
                     cudaStream_t stream);
// *sum (device) = Σ grads² in double, the same deterministic reduction as GradNorm (a rank's
// part of a global norm across shards).
cudaError_t GradSumSquares(const float* grads, size_t n, double* scratch, double* sum,
                           cudaStream_t stream);
// GradNorm, then grads ×= max_norm / (norm + 1e-6) where that is < 1 (max_norm <= 0: no clip).
cudaError_t ClipGradNorm(float* grads, size_t n, double max_norm, double* scratch, double* norm,
                         cudaStream_t stream);

// Mixed precision (cast.cu; CPU references in trainer/model/cpu_half.h): y = x rounded to
// nearest even; fp16 beyond its range becomes ±inf, NaN stays NaN.
cudaError_t CastToBf16(const float* x, __nv_bfloat16* y, size_t n, cudaStream_t stream);
cudaError_t CastToFp16(const float* x, __half* y, size_t n, cudaStream_t stream);
// x ×= factor (fp16 loss scaling's unscale: a power of two, so exact unless it underflows).
cudaError_t ScaleInPlace(float* x, size_t n, float factor, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
