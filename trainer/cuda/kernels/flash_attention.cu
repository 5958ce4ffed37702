// Fused attention kernels (flash_attention.h). Layout: one block per (bh, tile of kTile rows),
// one thread per row (a query row in the forward and the dQ kernel, a key row in the dK/dV
// kernel), the row's vectors in registers, the other side streamed through shared memory in
// tiles of kTile rows that every thread of the block reads at the same address (broadcast, no
// bank conflicts). Plain fp32 FMA loops: no tensor-core intrinsics, runs down to sm_61.
//
// Head dims are padded to kMaxD (8, 16, 32, 64, 128) with zeros in registers and shared tiles,
// so every loop has a compile-time bound (arrays stay in registers on a GPU) and the padding
// adds exact zeros. Cost model (declared per launch, census): every input byte once, as if
// re-reads of K/V (forward) and Q/dO (backward) tiles came from L2 — they are re-read
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

// Rows per block (threads) and per shared tile: 64 up to D = 64 (two tiles of 64×64 floats,
// 32 KiB of shared memory), 32 at D = 128 (the same 32 KiB).
template <int kMaxD>
inline constexpr int kTileRows = kMaxD <= 64 ? 64 : 32;

// The dropout multiplier of element (i, j) of block bh: as AttentionDropoutKernel.
__device__ inline float DropMul(uint64_t stream_seed, uint64_t flat, float p, float keep_scale) {
  return UniformAt(stream_seed, flat) >= p ? keep_scale : 0.0f;
}

// Loads rows [r0, r0 + kTile) of one head into tile[kTile][kMaxD] (rows past S and columns past
// D as zeros). All threads of the block take part.
template <typename T, int kMaxD, int kTile>
__device__ inline void LoadTile(float (*tile)[kMaxD], const T* base, int64_t ld, int r0, int S,
                                int D) {
  for (int idx = threadIdx.x; idx < kTile * kMaxD; idx += kTile) {
    const int r = idx / kMaxD, d = idx % kMaxD;
    tile[r][d] = (r0 + r < S && d < D) ? ToFloat(base[(r0 + r) * ld + d]) : 0.0f;
  }
}

template <typename T, int kMaxD>
__device__ inline void LoadRow(float* row, const T* p, int D) {
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) row[d] = d < D ? ToFloat(p[d]) : 0.0f;
}

template <int kMaxD>
__device__ inline float Dot(const float* a, const float* b) {
  float s = 0.0f;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) s = fmaf(a[d], b[d], s);
  return s;
}

// Grid: x = bh, y = query tile. stats (bh, i) = (m, l).
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kTileRows<kMaxD>)
    FlashForwardKernel(FlashAttentionForwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>;
  __shared__ float ks[kTile][kMaxD];
  __shared__ float vs[kTile][kMaxD];
  __shared__ float bias_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int i = blockIdx.y * kTile + threadIdx.x;
  const bool row_valid = i < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* kbase = a.k + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* vbase = a.v + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));

  float q[kMaxD], acc[kMaxD];
  if (row_valid) {
    LoadRow<T, kMaxD>(q, a.q + (static_cast<int64_t>(b) * S + i) * a.ld_qkv + head, D);
  } else {
    RM_UNROLL
    for (int d = 0; d < kMaxD; ++d) q[d] = 0.0f;
  }
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;

  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();  // the previous tile is read by every thread
    LoadTile<T, kMaxD, kTile>(ks, kbase, a.ld_qkv, j0, S, D);
    LoadTile<T, kMaxD, kTile>(vs, vbase, a.ld_qkv, j0, S, D);
    {
      const int j = j0 + threadIdx.x;
      bias_s[threadIdx.x] =
          (j < S && a.mask_bias != nullptr) ? a.mask_bias[static_cast<int64_t>(b) * S + j] : 0.0f;
    }
    __syncthreads();
    if (!row_valid) continue;
    const int n = S - j0 < kTile ? S - j0 : kTile;
    float s[kTile];
    float tile_max = m;
    RM_UNROLL
    for (int c = 0; c < kTile; ++c) {
      if (c < n) {
        s[c] = Dot<kMaxD>(q, ks[c]) * a.scale + bias_s[c];
        tile_max = fmaxf(tile_max, s[c]);
      }
    }
    const float correction = expf(m - tile_max);  // 0 on the first tile (m = -inf)
    l *= correction;
    RM_UNROLL
    for (int d = 0; d < kMaxD; ++d) acc[d] *= correction;
    const uint64_t row_flat = static_cast<uint64_t>(i) * S + j0;
    RM_UNROLL
    for (int c = 0; c < kTile; ++c) {
      if (c < n) {
        float p = expf(s[c] - tile_max);
        l += p;
        if (drop) p *= DropMul(stream_seed, row_flat + c, a.dropout_p, keep_scale);
        RM_UNROLL
        for (int d = 0; d < kMaxD; ++d) acc[d] = fmaf(p, vs[c][d], acc[d]);
      }
    }
    m = tile_max;
  }
  if (!row_valid) return;
  const float inv_l = 1.0f / l;
  T* o = a.out + (static_cast<int64_t>(b) * S + i) * a.ld_out + head;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) {
    if (d < D) o[d] = FromFloat<T>(acc[d] * inv_l);
  }
  float* st = a.stats + (static_cast<int64_t>(bh) * S + i) * 2;
  st[0] = m;
  st[1] = l;
}

// Query-parallel: D_i = dO_i · O_i (written to dsum) and dQ_i = scale · Σ_j dS_ij K_j.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kTileRows<kMaxD>)
    FlashBackwardDqKernel(FlashAttentionBackwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>;
  __shared__ float ks[kTile][kMaxD];
  __shared__ float vs[kTile][kMaxD];
  __shared__ float bias_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int i = blockIdx.y * kTile + threadIdx.x;
  const bool row_valid = i < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* kbase = a.k + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* vbase = a.v + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));

  float q[kMaxD], dout[kMaxD], dq[kMaxD];
  float m = 0.0f, inv_l = 0.0f, dsum = 0.0f;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) q[d] = dout[d] = dq[d] = 0.0f;
  if (row_valid) {
    const int64_t row = static_cast<int64_t>(b) * S + i;
    LoadRow<T, kMaxD>(q, a.q + row * a.ld_qkv + head, D);
    LoadRow<T, kMaxD>(dout, a.dout + row * a.ld_out + head, D);
    const T* o = a.out + row * a.ld_out + head;
    RM_UNROLL
    for (int d = 0; d < kMaxD; ++d) {
      if (d < D) dsum = fmaf(dout[d], ToFloat(o[d]), dsum);
    }
    const float* st = a.stats + (static_cast<int64_t>(bh) * S + i) * 2;
    m = st[0];
    inv_l = 1.0f / st[1];
    a.dsum[static_cast<int64_t>(bh) * S + i] = dsum;
  }

  for (int j0 = 0; j0 < S; j0 += kTile) {
    __syncthreads();
    LoadTile<T, kMaxD, kTile>(ks, kbase, a.ld_qkv, j0, S, D);
    LoadTile<T, kMaxD, kTile>(vs, vbase, a.ld_qkv, j0, S, D);
    {
      const int j = j0 + threadIdx.x;
      bias_s[threadIdx.x] =
          (j < S && a.mask_bias != nullptr) ? a.mask_bias[static_cast<int64_t>(b) * S + j] : 0.0f;
    }
    __syncthreads();
    if (!row_valid) continue;
    const int n = S - j0 < kTile ? S - j0 : kTile;
    const uint64_t row_flat = static_cast<uint64_t>(i) * S + j0;
    RM_UNROLL_4
    for (int c = 0; c < n; ++c) {
      const float p = expf(Dot<kMaxD>(q, ks[c]) * a.scale + bias_s[c] - m) * inv_l;
      float dp = Dot<kMaxD>(dout, vs[c]);
      if (drop) dp *= DropMul(stream_seed, row_flat + c, a.dropout_p, keep_scale);
      const float ds = p * (dp - dsum);
      RM_UNROLL
      for (int d = 0; d < kMaxD; ++d) dq[d] = fmaf(ds, ks[c][d], dq[d]);
    }
  }
  if (!row_valid) return;
  T* out = a.dq + (static_cast<int64_t>(b) * S + i) * a.ld_dqkv + head;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) {
    if (d < D) out[d] = FromFloat<T>(dq[d] * a.scale);
  }
}

// Key-parallel: dV_j = Σ_i (P ⊙ M)_ij dO_i, dK_j = scale · Σ_i dS_ij Q_i.
template <typename T, int kMaxD>
__global__ void __launch_bounds__(kTileRows<kMaxD>)
    FlashBackwardDkvKernel(FlashAttentionBackwardArgs<T> a, float keep_scale) {
  constexpr int kTile = kTileRows<kMaxD>;
  __shared__ float qs[kTile][kMaxD];
  __shared__ float dos[kTile][kMaxD];
  __shared__ float m_s[kTile], inv_l_s[kTile], dsum_s[kTile];
  const int S = a.S, D = a.D, NH = a.NH;
  const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
  const int j = blockIdx.y * kTile + threadIdx.x;
  const bool row_valid = j < S;
  const int64_t head = static_cast<int64_t>(h) * D;
  const T* qbase = a.q + static_cast<int64_t>(b) * S * a.ld_qkv + head;
  const T* dobase = a.dout + static_cast<int64_t>(b) * S * a.ld_out + head;
  const bool drop = a.dropout_p > 0.0f;
  const uint64_t stream_seed = Mix64(a.seed ^ static_cast<uint64_t>(bh));

  float k[kMaxD], v[kMaxD], dk[kMaxD], dv[kMaxD];
  float bias = 0.0f;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) k[d] = v[d] = dk[d] = dv[d] = 0.0f;
  if (row_valid) {
    const int64_t row = static_cast<int64_t>(b) * S + j;
    LoadRow<T, kMaxD>(k, a.k + row * a.ld_qkv + head, D);
    LoadRow<T, kMaxD>(v, a.v + row * a.ld_qkv + head, D);
    if (a.mask_bias != nullptr) bias = a.mask_bias[row];
  }

  for (int i0 = 0; i0 < S; i0 += kTile) {
    __syncthreads();
    LoadTile<T, kMaxD, kTile>(qs, qbase, a.ld_qkv, i0, S, D);
    LoadTile<T, kMaxD, kTile>(dos, dobase, a.ld_out, i0, S, D);
    {
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
    if (!row_valid) continue;
    const int n = S - i0 < kTile ? S - i0 : kTile;
    RM_UNROLL_4
    for (int r = 0; r < n; ++r) {
      const float p = expf(Dot<kMaxD>(qs[r], k) * a.scale + bias - m_s[r]) * inv_l_s[r];
      const float mul = drop ? DropMul(stream_seed, static_cast<uint64_t>(i0 + r) * S + j,
                                       a.dropout_p, keep_scale)
                             : 1.0f;
      const float pd = p * mul;
      const float ds = p * (Dot<kMaxD>(dos[r], v) * mul - dsum_s[r]);
      RM_UNROLL
      for (int d = 0; d < kMaxD; ++d) {
        dv[d] = fmaf(pd, dos[r][d], dv[d]);
        dk[d] = fmaf(ds, qs[r][d], dk[d]);
      }
    }
  }
  if (!row_valid) return;
  const int64_t row = static_cast<int64_t>(b) * S + j;
  T* dk_out = a.dk + row * a.ld_dqkv + head;
  T* dv_out = a.dv + row * a.ld_dqkv + head;
  RM_UNROLL
  for (int d = 0; d < kMaxD; ++d) {
    if (d < D) {
      dk_out[d] = FromFloat<T>(dk[d] * a.scale);
      dv_out[d] = FromFloat<T>(dv[d]);
    }
  }
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
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kTileRows<kMaxD>, 0, stream>>>(a, keep);
  return cudaGetLastError();
}

template <typename T, int kMaxD>
cudaError_t BackwardAt(const FlashAttentionBackwardArgs<T>& a, float keep,
                       const KernelCost& dq_cost, const KernelCost& dkv_cost, cudaStream_t stream) {
  DeclareKernelCost(dq_cost);
  FlashBackwardDqKernel<T, kMaxD>
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kTileRows<kMaxD>, 0, stream>>>(a, keep);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  DeclareKernelCost(dkv_cost);
  FlashBackwardDkvKernel<T, kMaxD>
      <<<Grid<kMaxD>(a.B, a.NH, a.S), kTileRows<kMaxD>, 0, stream>>>(a, keep);
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
