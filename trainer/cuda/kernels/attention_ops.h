// The element-wise and layout kernels around BERT's attention and pooler that the GEMMs leave:
// moving Q/K/V between the row layout of the projections and a heads-major layout in which one
// strided-batched GEMM covers every (batch, head), attention-probability dropout with the CPU
// model's masks, tanh for the pooler, and residual addition. CPU references: BertModel<float>
// (trainer/model/bert_model.cc) step by step; tests in bert_cuda_gpu_test.cc.
//
// Letters: B batch, S sequence, NH heads, D head dim, H = NH·D, BH = B·NH.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ringmaster::trainer::cuda {

// heads (B, NH, S, D)[b,h,s,d] = rows[(b·S + s)·ld + h·D + d]: one of Q, K or V out of the
// projections' (N, 3H) output (ld = 3H, rows offset by 0, H or 2H), or a (N, H) gradient.
cudaError_t RowsToHeads(const float* rows, int64_t ld, float* heads, int B, int S, int NH, int D,
                        cudaStream_t stream);
// The inverse: rows[(b·S + s)·ld + h·D + d] = heads[b,h,s,d] (other columns untouched).
cudaError_t HeadsToRows(const float* heads, float* rows, int64_t ld, int B, int S, int NH, int D,
                        cudaStream_t stream);

// Dropout of attention probabilities (BH blocks of S×S): mask[bh, i] = UniformAt(Mix64(seed ^
// bh), i) >= p ? 1/(1-p) : 0 (BertModel's per-(batch, head) stream) and dropped = probs ⊙ mask;
// probs is left as it is (backward needs it). p <= 0: dropped = probs, mask untouched.
cudaError_t AttentionDropoutForward(const float* probs, float* mask, float* dropped, int BH, int S,
                                    float p, uint64_t seed, cudaStream_t stream);

// y = tanh(x) (n elements; x and y may alias).
cudaError_t TanhForward(const float* x, float* y, size_t n, cudaStream_t stream);
// dx = dy · (1 − y²) with y = tanh(x) (dx and dy may alias).
cudaError_t TanhBackward(const float* dy, const float* y, float* dx, size_t n, cudaStream_t stream);
// out = a ⊙ b (n elements; out may alias a or b).
cudaError_t Multiply(const float* a, const float* b, float* out, size_t n, cudaStream_t stream);
// y += r (n elements).
cudaError_t AddInPlace(float* y, const float* r, size_t n, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
