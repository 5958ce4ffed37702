// BERT embeddings: out = word[id] + position[s] + token_type[type], positions 0..S-1 per
// sequence, as in BertModel::Forward. Backward scatters into the three tables (accumulating):
//   word: atomicAdd per element — repeated ids make the summation order, and so the last bits,
//         run-dependent; the padding row gets no gradient (nn.Embedding padding_idx).
//   position, token type: deterministic, one thread per table element summing rows in order.
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

__global__ void EmbeddingForwardKernel(const int32_t* ids, const int32_t* types, const float* word,
                                       const float* pos, const float* type, float* out, size_t N,
                                       int S, int H) {
  const size_t total = N * H;
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = k / H;
    const int j = static_cast<int>(k % H);
    const int s = static_cast<int>(r % S);
    const int t = types != nullptr ? types[r] : 0;
    out[k] = word[static_cast<size_t>(ids[r]) * H + j] + pos[static_cast<size_t>(s) * H + j] +
             type[static_cast<size_t>(t) * H + j];
  }
}

__global__ void EmbeddingWordBackwardKernel(const float* d, const int32_t* ids, float* gword,
                                            size_t N, int H, int pad_id) {
  const size_t total = N * H;
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = k / H;
    const int id = ids[r];
    if (id == pad_id) continue;
    atomicAdd(gword + static_cast<size_t>(id) * H + k % H, d[k]);
  }
}

// Element (s, j) of the position table: Σ_b d[b·S + s, j], b in order.
__global__ void EmbeddingPositionBackwardKernel(const float* d, float* gpos, int B, int S, int H) {
  const size_t total = static_cast<size_t>(S) * H;
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (int b = 0; b < B; ++b) acc += d[static_cast<size_t>(b) * S * H + k];
    gpos[k] += acc;
  }
}

// Element (t, j) of the token-type table: Σ over rows r with type t of d[r, j], r in order.
__global__ void EmbeddingTypeBackwardKernel(const float* d, const int32_t* types, float* gtype,
                                            size_t N, int T, int H) {
  const size_t total = static_cast<size_t>(T) * H;
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const int t = static_cast<int>(k / H);
    const int j = static_cast<int>(k % H);
    float acc = 0.0f;
    for (size_t r = 0; r < N; ++r) {
      const int tr = types != nullptr ? types[r] : 0;
      if (tr == t) acc += d[r * H + j];
    }
    gtype[k] += acc;
  }
}

int Blocks(size_t n, int threads) {
  const size_t b = CeilDiv<size_t>(n, threads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

}  // namespace

cudaError_t EmbeddingForward(const int32_t* ids, const int32_t* types, const float* word,
                             const float* pos, const float* type, float* out, int B, int S, int H,
                             cudaStream_t stream) {
  if (B <= 0 || S <= 0 || H <= 0 || ids == nullptr) return cudaErrorInvalidValue;
  const size_t N = static_cast<size_t>(B) * S;
  // ids (and types) in, the rows they select (each token's word row counted: a bound when ids
  // repeat), the S position rows, the type rows (types null: row 0; else BERT's two), out.
  const double types_bytes = types != nullptr ? 4.0 * N : 0.0;
  DeclareKernelCost(
      {4.0 * N + types_bytes + 4.0 * N * H + 4.0 * S * H + 4.0 * H * (types != nullptr ? 2 : 1),
       4.0 * N * H, 2.0 * N * H});
  EmbeddingForwardKernel<<<Blocks(N * H, 256), 256, 0, stream>>>(ids, types, word, pos, type, out,
                                                                 N, S, H);
  return cudaGetLastError();
}

cudaError_t EmbeddingBackward(const float* d, const int32_t* ids, const int32_t* types,
                              float* gword, float* gpos, float* gtype, int B, int S, int H,
                              int type_vocab, int pad_id, cudaStream_t stream) {
  if (B <= 0 || S <= 0 || H <= 0 || type_vocab <= 0 || ids == nullptr) {
    return cudaErrorInvalidValue;
  }
  const size_t N = static_cast<size_t>(B) * S;
  const double nh = 4.0 * N * H, types_bytes = types != nullptr ? 4.0 * N : 0.0;
  // Word: d and ids in; each non-pad token's gradient row read and written by atomics (a
  // bound: repeated ids share a row).
  DeclareKernelCost({nh + 4.0 * N + nh, nh, 1.0 * N * H});
  EmbeddingWordBackwardKernel<<<Blocks(N * H, 256), 256, 0, stream>>>(d, ids, gword, N, H, pad_id);
  DeclareKernelCost({nh + 4.0 * S * H, 4.0 * S * H, 1.0 * N * H});
  EmbeddingPositionBackwardKernel<<<Blocks(static_cast<size_t>(S) * H, 256), 256, 0, stream>>>(
      d, gpos, B, S, H);
  // Every thread scans all N types; each d element is read by its type's thread only.
  DeclareKernelCost({nh + types_bytes + 4.0 * type_vocab * H, 4.0 * type_vocab * H, 1.0 * N * H});
  EmbeddingTypeBackwardKernel<<<Blocks(static_cast<size_t>(type_vocab) * H, 128), 128, 0, stream>>>(
      d, types, gtype, N, type_vocab, H);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
