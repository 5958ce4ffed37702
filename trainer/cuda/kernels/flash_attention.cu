// Fused attention kernels (flash_attention.h). Layout: one block per (bh, tile of kTile rows),
// kSplit adjacent threads per row (a query row in the forward and the dQ kernel, a key row in
// the dK/dV kernel), each holding an interleaved part of the row's vectors in registers (at most
// 32 floats a vector), the other side streamed through shared memory in tiles of kTile rows that
// the threads of a row group read at adjacent words and every group at the same words
// (broadcast, no bank conflicts); dot products are summed over the group with warp shuffles.
// Plain fp32 FMA loops: no tensor-core intrinsics, runs down to sm_61.
//
// Head dims are padded to kMaxD (8, 16, 32, 64, 128) with zeros in registers and shared tiles,
// so every loop has a compile-time bound (arrays stay in registers on a GPU) and the padding
// adds exact zeros. Loops over keys are unrolled by 4 or in chunks of kChunk, not whole tiles
// (code size and nvcc time). Cost model (declared per launch, census): every input byte once, as
// if re-reads of K/V (forward) and Q/dO (backward) tiles came from L2 — they are re-read
// ceil(S/kTile) times per (b, h), 2 times at S = 128.
#include <cmath>

#include "trainer/cuda/kernels/counter_rng.cuh"
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/flash_attention.h"
#include "trainer/cuda/kernels/kernel_cost.h"

// nvcc unrolls the fixed-bound loops (registers, not local memory); host compilers (the
// emulator) decide for themselves.
#if defined(__CUDACC__)
#define RM_UNROLL _Pragma("unroll")
#define RM_UNROLL_4 _Pragma("unroll 4")
#else
#define RM_UNROLL
#define RM_UNROLL_4
#endif

namespace ringmaster::trainer::cuda {
namespace {

// Rows per block and per shared tile: 64 up to D = 64 (two tiles of 64×64 floats, 32 KiB of
// shared memory), 32 at D = 128 (the same 32 KiB).
template <int kMaxD>
inline constexpr int kTileRows = kMaxD <= 64 ? 64 : 32;
// Threads per row: a row's vectors are split over kSplit adjacent lanes, lane `part` holding the
// elements d = e·kSplit + part (e < kPer), so that no thread holds more than 32 floats of any
// vector. One thread a row at D = 64 held 192 (forward) to 256 (dK/dV) floats in registers:
// past the 255-register limit, so ptxas spilled to local memory. Interleaving keeps a warp's
// shared-memory reads of one tile row on distinct banks (the kSplit parts of a row are adjacent
// words; the rows' groups read the same words: broadcast).
template <int kMaxD>
inline constexpr int kSplit = kMaxD <= 32 ? 1 : kMaxD / 32;
template <int kMaxD>
inline constexpr int kPer = kMaxD / kSplit<kMaxD>;
template <int kMaxD>
inline constexpr int kThreads = kTileRows<kMaxD>* kSplit<kMaxD>;
// Keys per online-softmax step of the forward: the scores of a chunk are held in registers, the
// running max and the accumulator rescaled once per chunk.
inline constexpr int kChunk = 16;

// The dropout multiplier of element (i, j) of block bh: as AttentionDropoutKernel.
__device__ inline float DropMul(uint64_t stream_seed, uint64_t flat, float p, float keep_scale) {
  return UniformAt(stream_seed, flat) >= p ? keep_scale : 0.0f;
}

// The sum over a row's kSplit lanes (adjacent, aligned: kSplit divides 32), in every one of them.
// Every lane of the warp calls it (rows past S included), so the full mask holds.
template <int kS>
__device__ inline float GroupSum(float v) {
  RM_UNROLL
  for (int o = kS / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Loads rows [r0, r0 + kTile) of one head into tile[kTile][kMaxD] (rows past S and columns past
// D as zeros). All kThreads threads of the block take part.
template <typename T, int kMaxD>
__device__ inline void LoadTile(float (*tile)[kMaxD], const T* base, int64_t ld, int r0, int S,
                                int D) {
  constexpr int kTile = kTileRows<kMaxD>;
  for (int idx = threadIdx.x; idx < kTile * kMaxD; idx += kThreads<kMaxD>) {
    const int r = idx / kMaxD, d = idx % kMaxD;
    tile[r][d] = (r0 + r < S && d < D) ? ToFloat(base[(r0 + r) * ld + d]) : 0.0f;
  }
}

// This lane's part of a row (zeros past D, and everywhere for a null row: a row past S).
template <typename T, int kMaxD>
__device__ inline void LoadPart(float* part_row, const T* p, int D, int part) {
  constexpr int kS = kSplit<kMaxD>;
  RM_UNROLL
  for (int e = 0; e < kPer<kMaxD>; ++e) {
    const int d = e * kS + part;
    part_row[e] = (p != nullptr && d < D) ? ToFloat(p[d]) : 0.0f;
  }
}

template <typename T, int kMaxD>
__device__ inline void StorePart(T* p, const float* part_row, float mul, int D, int part) {
  constexpr int kS = kSplit<kMaxD>;
  RM_UNROLL
  for (int e = 0; e < kPer<kMaxD>; ++e) {
    const int d = e * kS + part;
    if (d < D) p[d] = FromFloat<T>(part_row[e] * mul);
  }
}

// This lane's partial dot product of its part of a row with a shared tile row.
template <int kMaxD>
__device__ inline float DotPart(const float* part_row, const float* tile_row, int part) {
  constexpr int kS = kSplit<kMaxD>;
  float s = 0.0f;
  RM_UNROLL
  for (int e = 0; e < kPer<kMaxD>; ++e) s = fmaf(part_row[e], tile_row[e * kS + part], s);
  return s;
}

// The row's dot product with a shared tile row, in all of its lanes.
template <int kMaxD>
__device__ inline float Dot(const float* part_row, const float* tile_row, int part) {
  return GroupSum<kSplit<kMaxD>>(DotPart<kMaxD>(part_row, tile_row, part));
}

// acc[e] += w · tile_row[d(e)] over this lane's part.
template <int kMaxD>
__device__ inline void AxpyPart(float* acc, float w, const float* tile_row, int part) {
  constexpr int kS = kSplit<kMaxD>;
  RM_UNROLL
  for (int e = 0; e < kPer<kMaxD>; ++e) acc[e] = fmaf(w, tile_row[e * kS + part], acc[e]);
}

// Grid: x = bh, y = query tile. stats (bh, i) = (m, l).
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads<kMaxD>)
    FlashForwardKernel(FlashAttentionForwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>, kP = kPer<kMaxD>, kS = kSplit<kMaxD>;
  __shared__ float ks[kTile][kMaxD];
  __shared__ float vs[kTile][kMaxD];
  __shared__ float bias_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int part = threadIdx.x % kS;
  const int i = blockIdx.y * kTile + threadIdx.x / kS;
  const bool row_valid = i < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* kbase = a.k + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* vbase = a.v + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));

  // A row past S computes on zeros alongside the others (its lanes take part in the group sums)
  // and stores nothing.
  float q[kP], acc[kP];
  LoadPart<T, kMaxD>(
      q, row_valid ? a.q + (static_cast<int64_t>(b) * S + i) * a.ld_qkv + head : nullptr, D, part);
  RM_UNROLL
  for (int e = 0; e < kP; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();  // the previous tile is read by every thread
    LoadTile<T, kMaxD>(ks, kbase, a.ld_qkv, j0, S, D);
    LoadTile<T, kMaxD>(vs, vbase, a.ld_qkv, j0, S, D);
    if (threadIdx.x < kTile) {
      const int j = j0 + threadIdx.x;
      bias_s[threadIdx.x] =
          (j < S && a.mask_bias != nullptr) ? a.mask_bias[static_cast<int64_t>(b) * S + j] : 0.0f;
    }
    __syncthreads();
    const int n = S - j0 < kTile ? S - j0 : kTile;
    const uint64_t row_flat = static_cast<uint64_t>(i) * S + j0;
#if defined(__CUDACC__)
#pragma unroll 1
#endif
    for (int c0 = 0; c0 < n; c0 += kChunk) {
      float s[kChunk];
      float chunk_max = m;
      RM_UNROLL
      for (int c = 0; c < kChunk; ++c) {
        if (c0 + c < n) {  // the same in every lane of the block
          s[c] = Dot<kMaxD>(q, ks[c0 + c], part) * a.scale + bias_s[c0 + c];
          chunk_max = fmaxf(chunk_max, s[c]);
        }
      }
      const float correction = expf(m - chunk_max);  // 0 on the first chunk (m = -inf)
      l *= correction;
      RM_UNROLL
      for (int e = 0; e < kP; ++e) acc[e] *= correction;
      RM_UNROLL
      for (int c = 0; c < kChunk; ++c) {
        if (c0 + c < n) {
          float p = expf(s[c] - chunk_max);
          l += p;
          if (drop) p *= DropMul(stream_seed, row_flat + c0 + c, a.dropout_p, keep_scale);
          AxpyPart<kMaxD>(acc, p, vs[c0 + c], part);
        }
      }
      m = chunk_max;
    }
  }
  if (!row_valid) return;
  StorePart<T, kMaxD>(a.out + (static_cast<int64_t>(b) * S + i) * a.ld_out + head, acc, 1.0f / l, D,
                      part);
  if (part == 0) {
    float* st = a.stats + (static_cast<int64_t>(bh) * S + i) * 2;
    st[0] = m;
    st[1] = l;
  }
}

// Query-parallel: D_i = dO_i · O_i (written to dsum) and dQ_i = scale · Σ_j dS_ij K_j.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads<kMaxD>)
    FlashBackwardDqKernel(FlashAttentionBackwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>, kP = kPer<kMaxD>, kS = kSplit<kMaxD>;
  __shared__ float ks[kTile][kMaxD];
  __shared__ float vs[kTile][kMaxD];
  __shared__ float bias_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int part = threadIdx.x % kS;
  const int i = blockIdx.y * kTile + threadIdx.x / kS;
  const bool row_valid = i < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* kbase = a.k + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* vbase = a.v + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));
  const int64_t row = static_cast<int64_t>(b) * S + i;

  float q[kP], dout[kP], o[kP], dq[kP];
  LoadPart<T, kMaxD>(q, row_valid ? a.q + row * a.ld_qkv + head : nullptr, D, part);
  LoadPart<T, kMaxD>(dout, row_valid ? a.dout + row * a.ld_out + head : nullptr, D, part);
  LoadPart<T, kMaxD>(o, row_valid ? a.out + row * a.ld_out + head : nullptr, D, part);
  float dsum = 0.0f;
  RM_UNROLL
  for (int e = 0; e < kP; ++e) {
    dsum = fmaf(dout[e], o[e], dsum);
    dq[e] = 0.0f;
  }
  dsum = GroupSum<kS>(dsum);
  float m = 0.0f, inv_l = 0.0f;
  if (row_valid) {
    const float* st = a.stats + (static_cast<int64_t>(bh) * S + i) * 2;
    m = st[0];
    inv_l = 1.0f / st[1];
    if (part == 0) a.dsum[static_cast<int64_t>(bh) * S + i] = dsum;
  }

  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();
    LoadTile<T, kMaxD>(ks, kbase, a.ld_qkv, j0, S, D);
    LoadTile<T, kMaxD>(vs, vbase, a.ld_qkv, j0, S, D);
    if (threadIdx.x < kTile) {
      const int j = j0 + threadIdx.x;
      bias_s[threadIdx.x] =
          (j < S && a.mask_bias != nullptr) ? a.mask_bias[static_cast<int64_t>(b) * S + j] : 0.0f;
    }
    __syncthreads();
    const int n = S - j0 < kTile ? S - j0 : kTile;
    const uint64_t row_flat = static_cast<uint64_t>(i) * S + j0;
    RM_UNROLL_4
    for (int c = 0; c < n; ++c) {
      const float qk = Dot<kMaxD>(q, ks[c], part);
      float dp = Dot<kMaxD>(dout, vs[c], part);
      const float p = row_valid ? expf(qk * a.scale + bias_s[c] - m) * inv_l : 0.0f;
      if (drop) dp *= DropMul(stream_seed, row_flat + c, a.dropout_p, keep_scale);
      AxpyPart<kMaxD>(dq, p * (dp - dsum), ks[c], part);
    }
  }
  if (!row_valid) return;
  StorePart<T, kMaxD>(a.dq + row * a.ld_dqkv + head, dq, a.scale, D, part);
}

// Key-parallel: dV_j = Σ_i (P ⊙ M)_ij dO_i, dK_j = scale · Σ_i dS_ij Q_i.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kThreads<kMaxD>)
    FlashBackwardDkvKernel(FlashAttentionBackwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>, kP = kPer<kMaxD>, kS = kSplit<kMaxD>;
  __shared__ float qs[kTile][kMaxD];
  __shared__ float dos[kTile][kMaxD];
  __shared__ float m_s[kTile], inv_l_s[kTile], dsum_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int part = threadIdx.x % kS;
  const int j = blockIdx.y * kTile + threadIdx.x / kS;
  const bool row_valid = j < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* qbase = a.q + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* dobase = a.dout + static_cast<int64_t>(b) * S * a.ld_out + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));
  const int64_t row = static_cast<int64_t>(b) * S + j;

  float k[kP], v[kP], dk[kP], dv[kP];
  LoadPart<T, kMaxD>(k, row_valid ? a.k + row * a.ld_qkv + head : nullptr, D, part);
  LoadPart<T, kMaxD>(v, row_valid ? a.v + row * a.ld_qkv + head : nullptr, D, part);
  RM_UNROLL
  for (int e = 0; e < kP; ++e) dk[e] = dv[e] = 0.0f;
  const float bias = (row_valid && a.mask_bias != nullptr) ? a.mask_bias[row] : 0.0f;

  for (int i0 = 0; i0 < S; i0 += kTile) {
    __syncthreads();
    LoadTile<T, kMaxD>(qs, qbase, a.ld_qkv, i0, S, D);
    LoadTile<T, kMaxD>(dos, dobase, a.ld_out, i0, S, D);
    if (threadIdx.x < kTile) {
      const int i = i0 + threadIdx.x;
      if (i < S) {
        const int64_t r = static_cast<int64_t>(bh) * S + i;
        m_s[threadIdx.x] = a.stats[2 * r];
        inv_l_s[threadIdx.x] = 1.0f / a.stats[2 * r + 1];
        dsum_s[threadIdx.x] = a.dsum[r];
      } else {
        m_s[threadIdx.x] = inv_l_s[threadIdx.x] = dsum_s[threadIdx.x] = 0.0f;
      }
    }
    __syncthreads();
    const int n = S - i0 < kTile ? S - i0 : kTile;
    RM_UNROLL_4
    for (int r = 0; r < n; ++r) {
      const float qk = Dot<kMaxD>(k, qs[r], part);
      const float dov = Dot<kMaxD>(v, dos[r], part);
      const float p = row_valid ? expf(qk * a.scale + bias - m_s[r]) * inv_l_s[r] : 0.0f;
      const float mul = drop ? DropMul(stream_seed, static_cast<uint64_t>(i0 + r) * S + j,
                                       a.dropout_p, keep_scale)
                             : 1.0f;
      AxpyPart<kMaxD>(dv, p * mul, dos[r], part);
      AxpyPart<kMaxD>(dk, p * (dov * mul - dsum_s[r]), qs[r], part);
    }
  }
  if (!row_valid) return;
  StorePart<T, kMaxD>(a.dk + row * a.ld_dqkv + head, dk, a.scale, D, part);
  StorePart<T, kMaxD>(a.dv + row * a.ld_dqkv + head, dv, 1.0f, D, part);
}

bool ValidShape(int B, int S, int NH, int D, int64_t ld_in, int64_t ld_out, float p) {
  if (B <= 0 || S <= 0 || NH <= 0 || !FlashAttentionSupported(D)) return false;
  const int64_t width = static_cast<int64_t>(NH) * D;
  if (ld_in < width || ld_out < width) return false;
  if (!(p >= 0.0f && p < 1.0f)) return false;
  const int64_t bh = static_cast<int64_t>(B) * NH;
  return bh <= 0x7fffffff && (S + 31) / 32 <= 65535;
}

template <int kMaxD>
dim3 Grid(int B, int NH, int S) {
  constexpr int kTile = kTileRows<kMaxD>;
  return dim3(static_cast<unsigned>(B * NH), static_cast<unsigned>(CeilDiv<size_t>(S, kTile)));
}

float KeepScale(float p) { return p > 0.0f ? 1.0f / (1.0f - p) : 1.0f; }

template <typename T, int kMaxD>
cudaError_t ForwardAt(const FlashAttentionForwardArgs<T>& a, float keep, cudaStream_t stream) {
  FlashForwardKernel<T, kMaxD>
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kThreads<kMaxD>, 0, stream>>>(a, keep);
  return cudaGetLastError();
}

template <typename T, int kMaxD>
cudaError_t BackwardAt(const FlashAttentionBackwardArgs<T>& a, float keep,
                       const KernelCost& dq_cost, const KernelCost& dkv_cost, cudaStream_t stream) {
  DeclareKernelCost(dq_cost);
  FlashBackwardDqKernel<T, kMaxD>
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kThreads<kMaxD>, 0, stream>>>(a, keep);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  DeclareKernelCost(dkv_cost);
  FlashBackwardDkvKernel<T, kMaxD>
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kThreads<kMaxD>, 0, stream>>>(a, keep);
  return cudaGetLastError();
}

// The smallest instance holding D (C++17: nvcc compiles the kernels as C++17).
template <typename T>
cudaError_t Forward(const FlashAttentionForwardArgs<T>& a, float keep, cudaStream_t stream) {
  if (a.D <= 8) return ForwardAt<T, 8>(a, keep, stream);
  if (a.D <= 16) return ForwardAt<T, 16>(a, keep, stream);
  if (a.D <= 32) return ForwardAt<T, 32>(a, keep, stream);
  if (a.D <= 64) return ForwardAt<T, 64>(a, keep, stream);
  return ForwardAt<T, 128>(a, keep, stream);
}

template <typename T>
cudaError_t Backward(const FlashAttentionBackwardArgs<T>& a, float keep, const KernelCost& dq,
                     const KernelCost& dkv, cudaStream_t stream) {
  if (a.D <= 8) return BackwardAt<T, 8>(a, keep, dq, dkv, stream);
  if (a.D <= 16) return BackwardAt<T, 16>(a, keep, dq, dkv, stream);
  if (a.D <= 32) return BackwardAt<T, 32>(a, keep, dq, dkv, stream);
  if (a.D <= 64) return BackwardAt<T, 64>(a, keep, dq, dkv, stream);
  return BackwardAt<T, 128>(a, keep, dq, dkv, stream);
}

}  // namespace

bool FlashAttentionSupported(int head_dim) { return head_dim >= 1 && head_dim <= 128; }

template <typename T>
cudaError_t FlashAttentionForward(const FlashAttentionForwardArgs<T>& a, cudaStream_t stream) {
  if (!ValidShape(a.B, a.S, a.NH, a.D, a.ld_qkv, a.ld_out, a.dropout_p)) {
    return cudaErrorInvalidValue;
  }
  const double e = sizeof(T), rows = static_cast<double>(a.B) * a.NH * a.S;
  const double vec = rows * a.D * e, s2d = rows * a.S * a.D;
  // Q, K, V and the bias in; O and the two stats floats per row out. FLOPs: QKᵀ and PV.
  DeclareKernelCost(
      {3 * vec + (a.mask_bias != nullptr ? 4.0 * a.B * a.S : 0.0), vec + 8 * rows, 4 * s2d});
  return Forward(a, KeepScale(a.dropout_p), stream);
}

template <typename T>
cudaError_t FlashAttentionBackward(const FlashAttentionBackwardArgs<T>& a, cudaStream_t stream) {
  if (!ValidShape(a.B, a.S, a.NH, a.D, a.ld_qkv, a.ld_out, a.dropout_p) ||
      a.ld_dqkv < static_cast<int64_t>(a.NH) * a.D) {
    return cudaErrorInvalidValue;
  }
  const double e = sizeof(T), rows = static_cast<double>(a.B) * a.NH * a.S;
  const double vec = rows * a.D * e, s2d = rows * a.S * a.D;
  const double bias = a.mask_bias != nullptr ? 4.0 * a.B * a.S : 0.0;
  // dQ kernel: Q, K, V, O, dO, bias, stats in; dQ and D out. FLOPs: QKᵀ, dO·Vᵀ, dS·K.
  const KernelCost dq{5 * vec + bias + 8 * rows, vec + 4 * rows, 6 * s2d};
  // dK/dV kernel: Q, K, V, dO, bias, stats, D in; dK, dV out. FLOPs: QKᵀ, dO·Vᵀ, PᵀdO, dSᵀQ.
  const KernelCost dkv{4 * vec + bias + 12 * rows, 2 * vec, 8 * s2d};
  return Backward(a, KeepScale(a.dropout_p), dq, dkv, stream);
}

template cudaError_t FlashAttentionForward<float>(const FlashAttentionForwardArgs<float>&,
                                                  cudaStream_t);
template cudaError_t FlashAttentionBackward<float>(const FlashAttentionBackwardArgs<float>&,
                                                   cudaStream_t);

}  // namespace ringmaster::trainer::cuda
