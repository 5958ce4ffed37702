// The wire codecs (trainer/parallel/wire_codec.h) on the device, byte-identical to the CPU codec
// (wire_codec_gpu.h). One thread per element of a 256-element block: an int8 block, or a chunk
// of the two-stage all-reduce. The conversions are the CPU's integer formulas; the float steps
// are the CPU's operations in the CPU's order: an IEEE division for the int8 scale and codes,
// and the decoded value code * scale rounded on its own before it is subtracted or added
// (__fmul_rn/__fadd_rn, which nvcc never fuses into an FMA; the CPU turns contraction off too).
#include <type_traits>

#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/wire_codec.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kThreads = 256;  // one thread per element of a block / chunk
constexpr size_t kChunk = kInt8BlockSize;
static_assert(kChunk == kThreads, "a block of threads encodes one int8 block");
constexpr int kWarps = kThreads / 32;
// Grid-stride loops beyond this many blocks: 2048 blocks of 256 threads fill an H200 (132 SMs,
// 8 such blocks each) twice over, and the tests reach the loop with 2^19 elements.
constexpr size_t kMaxGrid = 2048;

template <WireCodec C>
constexpr size_t kElemBytes = C == WireCodec::kNone ? 4 : (C == WireCodec::kInt8 ? 1 : 2);
// EncodedBytes(C, kChunk): one scale (int8) plus the elements.
template <WireCodec C>
constexpr size_t kChunkBytes = (C == WireCodec::kInt8 ? 4 : 0) + kChunk* kElemBytes<C>;

int Grid(size_t blocks) {
  return static_cast<int>(blocks == 0 ? 1 : (blocks < kMaxGrid ? blocks : kMaxGrid));
}

bool Aligned4(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

// Runs f(std::integral_constant<WireCodec, c>) so that kernels are instantiated per codec.
template <typename F>
cudaError_t WithCodec(WireCodec c, F&& f) {
  switch (c) {
    case WireCodec::kNone:
      return f(std::integral_constant<WireCodec, WireCodec::kNone>{});
    case WireCodec::kFp16:
      return f(std::integral_constant<WireCodec, WireCodec::kFp16>{});
    case WireCodec::kBf16:
      return f(std::integral_constant<WireCodec, WireCodec::kBf16>{});
    case WireCodec::kInt8:
      return f(std::integral_constant<WireCodec, WireCodec::kInt8>{});
  }
  return cudaErrorInvalidValue;
}

// ---- Bit-level conversions: wire_codec.cc's formulas, on the device.

// Round-to-nearest-even; subnormals kept; |x| >= 65520 and ±inf saturate to ±65504; NaN becomes
// a quiet NaN keeping its top payload bits.
__device__ inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = __float_as_uint(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t u = bits & 0x7fffffffu;
  const int32_t a = static_cast<int32_t>(u);
  const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // rebias, round 13 bits
  const uint32_t wide_shift = static_cast<uint32_t>(126 - (a >> 23));  // huge when negative
  const uint32_t shift = wide_shift < 31u ? wide_shift : 31u;
  const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  const uint32_t sub = (mant + ((1u << shift) >> 1) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);
  uint32_t o = a < 0x38800000 ? sub : normal;
  o = a >= 0x477ff000 ? 0x7bffu : o;
  o = a > 0x7f800000 ? nan : o;
  return static_cast<uint16_t>(sign | o);
}

__device__ inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t is_infnan = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  const uint32_t is_normal = 0u - static_cast<uint32_t>(em >= 0x0400u);
  const uint32_t normal = (em << 13) + 0x38000000u + (is_infnan & 0x38000000u);
  const uint32_t sub =
      __float_as_uint(__fmul_rn(static_cast<float>(static_cast<int32_t>(em)), 0x1p-24f));
  return __uint_as_float(((normal & is_normal) | (sub & ~is_normal)) | sign);
}

__device__ inline uint16_t FloatToBf16(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000 ? nan : rounded);
}

__device__ inline float Bf16ToFloat(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ inline float FiniteOrZero(float v) {
  return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u ? v : 0.0f;
}

// ---- One encoded block of kChunk elements: the int8 scale (4 bytes) and the elements.

template <typename Byte>
struct Block {
  Byte* scale;  // int8 only
  Byte* elems;  // element i at elems + kElemBytes<C> * i
};

// Block b of a plain encoding of n floats (`blocks` = ceil(n / kChunk) of them): int8 keeps all
// scales first, then all codes.
template <WireCodec C, typename Byte>
__device__ inline Block<Byte> PlainBlock(Byte* base, size_t blocks, size_t b) {
  if constexpr (C == WireCodec::kInt8) {
    return {base + 4 * b, base + 4 * blocks + b * kChunk};
  } else {
    return {nullptr, base + b * kChunk * kElemBytes<C>};
  }
}

// Slot v of a buffer of encoded chunks (each kChunkBytes<C>: scale then codes for int8).
template <WireCodec C, typename Byte>
__device__ inline Block<Byte> ChunkSlot(Byte* base, size_t v) {
  Byte* p = base + v * kChunkBytes<C>;
  if constexpr (C == WireCodec::kInt8) {
    return {p, p + 4};
  } else {
    return {nullptr, p};
  }
}

// Encodes this thread's element y (index threadIdx.x; y = x + residual under error feedback)
// of a block into blk and returns y minus what the receiver decodes (the new residual; 0 where
// the CPU clears it). Elements with !valid (past n) take no part and write nothing. For int8
// every thread of the block must call it (barriers); warp_max is kWarps ints of shared memory.
template <WireCodec C>
__device__ float EncodeElement(float y, bool valid, Block<uint8_t> blk, int* warp_max) {
  const int i = threadIdx.x;
  if constexpr (C == WireCodec::kNone) {
    if (valid) reinterpret_cast<float*>(blk.elems)[i] = y;
    return 0.0f;  // sent exactly
  } else if constexpr (C == WireCodec::kFp16) {
    const uint16_t h = FloatToHalf(y);
    if (valid) reinterpret_cast<uint16_t*>(blk.elems)[i] = h;
    return FiniteOrZero(y - HalfToFloat(h));
  } else if constexpr (C == WireCodec::kBf16) {
    const uint16_t h = FloatToBf16(y);
    if (valid) reinterpret_cast<uint16_t*>(blk.elems)[i] = h;
    return FiniteOrZero(y - Bf16ToFloat(h));
  } else {
    // max |y| on the bit patterns (inf/NaN above every finite value), over the valid elements.
    int a = valid ? (__float_as_int(y) & 0x7fffffff) : 0;
    for (int o = 16; o > 0; o >>= 1) {
      const int other = __shfl_xor_sync(0xffffffffu, a, o);
      a = other > a ? other : a;
    }
    if (i % 32 == 0) warp_max[i / 32] = a;
    __syncthreads();
    int amax_bits = 0;
    for (int w = 0; w < kWarps; ++w) amax_bits = warp_max[w] > amax_bits ? warp_max[w] : amax_bits;
    __syncthreads();                                          // warp_max is free for the next block
    const bool finite = amax_bits <= 0x7f7fffff;              // FLT_MAX
    const bool tiny = finite && amax_bits < 0x00800000;       // max |y| < 2^-126 (FLT_MIN)
    const float scale = !finite ? __int_as_float(0x7fc00000)  // quiet NaN: decodes to NaN
                        : tiny  ? 0.0f
                                : __int_as_float(amax_bits) / 127.0f;
    if (i == 0) *reinterpret_cast<float*>(blk.scale) = scale;
    int8_t* codes = reinterpret_cast<int8_t*>(blk.elems);
    if (!finite || tiny) {
      if (valid) codes[i] = 0;
      return 0.0f;  // residual cleared
    }
    // Round half away from zero exactly as the CPU: q - trunc(q) is exact.
    const float q = y / scale;
    int t = static_cast<int>(q);
    const float frac = q - static_cast<float>(t);
    t += frac >= 0.5f;
    t -= frac <= -0.5f;
    const int code = t > 127 ? 127 : (t < -127 ? -127 : t);
    if (valid) codes[i] = static_cast<int8_t>(code);
    return __fadd_rn(y, -__fmul_rn(static_cast<float>(code), scale));
  }
}

// Element i of an encoded block, decoded.
template <WireCodec C>
__device__ inline float DecodeElement(Block<const uint8_t> blk, size_t i) {
  if constexpr (C == WireCodec::kNone) {
    return reinterpret_cast<const float*>(blk.elems)[i];
  } else if constexpr (C == WireCodec::kFp16) {
    return HalfToFloat(reinterpret_cast<const uint16_t*>(blk.elems)[i]);
  } else if constexpr (C == WireCodec::kBf16) {
    return Bf16ToFloat(reinterpret_cast<const uint16_t*>(blk.elems)[i]);
  } else {
    const float scale = *reinterpret_cast<const float*>(blk.scale);
    return __fmul_rn(static_cast<float>(reinterpret_cast<const int8_t*>(blk.elems)[i]), scale);
  }
}

// ---- Kernels: plain Encode / Decode / DecodeAdd of n floats.

template <WireCodec C>
__global__ void EncodeKernel(const float* x, size_t n, float* residual, uint8_t* out,
                             size_t blocks) {
  __shared__ int warp_max[kWarps];
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t i = b * kChunk + threadIdx.x;
    const bool valid = i < n;
    float y = valid ? x[i] : 0.0f;
    if (residual != nullptr && valid) y = y + residual[i];
    const float r = EncodeElement<C>(y, valid, PlainBlock<C>(out, blocks, b), warp_max);
    if (residual != nullptr && valid) residual[i] = r;
  }
}

template <WireCodec C, bool kAdd>
__global__ void DecodeKernel(const uint8_t* in, size_t n, float* out, size_t blocks) {
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t i = b * kChunk + threadIdx.x;
    if (i >= n) continue;
    const float v = DecodeElement<C>(PlainBlock<C>(in, blocks, b), threadIdx.x);
    if constexpr (kAdd) {
      out[i] = __fadd_rn(out[i], v);
    } else {
      out[i] = v;
    }
  }
}

// ---- Zero-chunk mask: a warp per mask byte (8 chunks), no shared memory.

__global__ void ChunkMaskKernel(const float* data, const float* residual, size_t n, size_t chunks,
                                uint8_t* mask, size_t mask_bytes) {
  const size_t lane = threadIdx.x % 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * kWarps;
  for (size_t byte = blockIdx.x * static_cast<size_t>(kWarps) + threadIdx.x / 32; byte < mask_bytes;
       byte += warps) {
    unsigned bits = 0;
    for (unsigned b = 0; b < 8; ++b) {
      const size_t c = byte * 8 + b;  // the same for the whole warp
      bool nz = false;
      if (c < chunks) {
        const size_t begin = c * kChunk, len = n - begin < kChunk ? n - begin : kChunk;
        for (size_t j = lane; j < len; j += 32) {
          nz |= data[begin + j] != 0.0f;  // NaN != 0
          if (residual != nullptr) nz |= residual[begin + j] != 0.0f;
        }
      }
      bits |= (__any_sync(0xffffffffu, nz) ? 1u : 0u) << b;
    }
    if (lane == 0) mask[byte] = static_cast<uint8_t>(bits);
  }
}

// ---- The two-stage all-reduce's chunk steps.

__device__ inline size_t ChunkOf(const uint32_t* active, size_t v) {
  return active != nullptr ? active[v] : v;
}
__device__ inline size_t ChunkLen(size_t c, size_t n) {
  const size_t begin = c * kChunk;
  return n - begin < kChunk ? n - begin : kChunk;
}

template <WireCodec C>
__global__ void EncodeChunksKernel(const float* data, size_t n, float* residual,
                                   const uint32_t* active, size_t m, size_t slots, uint8_t* out) {
  __shared__ int warp_max[kWarps];
  const size_t i = threadIdx.x;
  for (size_t v = blockIdx.x; v < slots; v += gridDim.x) {
    if (v >= m) {  // padding: zero bytes (decode to +0 in every codec)
      uint8_t* p = out + v * kChunkBytes<C>;
      for (size_t j = i; j < kChunkBytes<C>; j += kThreads) p[j] = 0;
      continue;
    }
    const size_t begin = ChunkOf(active, v) * kChunk, len = ChunkLen(ChunkOf(active, v), n);
    const bool in = i < len;
    // A short chunk is encoded zero-padded, the padding's residual 0 (the CPU's tail buffers).
    float y = in ? data[begin + i] : 0.0f;
    if (residual != nullptr) y = y + (in ? residual[begin + i] : 0.0f);
    const float r = EncodeElement<C>(y, true, ChunkSlot<C>(out, v), warp_max);
    if (residual != nullptr && in) residual[begin + i] = r;
  }
}

template <WireCodec C>
__global__ void SumRunsKernel(const uint8_t* in, int g, size_t per, size_t run_bytes, float* sum) {
  const size_t i = threadIdx.x;
  for (size_t k = blockIdx.x; k < per; k += gridDim.x) {
    float acc = DecodeElement<C>(ChunkSlot<C>(in, k), i);
    for (int r = 1; r < g; ++r) {
      acc = __fadd_rn(acc, DecodeElement<C>(ChunkSlot<C>(in + r * run_bytes, k), i));
    }
    sum[k * kChunk + i] = acc;
  }
}

template <WireCodec C>
__global__ void EncodeOwnedSumsKernel(const float* sum, size_t per, size_t first, size_t m,
                                      const uint32_t* active, size_t n, float* residual,
                                      uint8_t* out) {
  __shared__ int warp_max[kWarps];
  const size_t i = threadIdx.x;
  for (size_t k = blockIdx.x; k < per; k += gridDim.x) {
    const size_t v = first + k;
    const float x = sum[k * kChunk + i];
    if (residual == nullptr || v >= m) {
      EncodeElement<C>(x, true, ChunkSlot<C>(out, k), warp_max);
      continue;
    }
    // Error feedback from a zeroed residual: y = x + 0, as the CPU's Encode computes it (which
    // turns -0 into +0).
    const float r = EncodeElement<C>(x + 0.0f, true, ChunkSlot<C>(out, k), warp_max);
    const size_t begin = ChunkOf(active, v) * kChunk;
    if (i < ChunkLen(ChunkOf(active, v), n)) residual[begin + i] = residual[begin + i] + r;
  }
}

template <WireCodec C>
__global__ void DecodeChunksKernel(const uint8_t* in, size_t m, const uint32_t* active, size_t n,
                                   float* data) {
  const size_t i = threadIdx.x;
  for (size_t v = blockIdx.x; v < m; v += gridDim.x) {
    const size_t c = ChunkOf(active, v);
    if (i < ChunkLen(c, n)) data[c * kChunk + i] = DecodeElement<C>(ChunkSlot<C>(in, v), i);
  }
}

size_t Blocks(size_t n) { return CeilDiv<size_t>(n, kChunk); }

}  // namespace

cudaError_t WireEncode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!Aligned4(out)) return cudaErrorInvalidValue;
  const size_t blocks = Blocks(n);
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    EncodeKernel<C><<<Grid(blocks), kThreads, 0, stream>>>(x, n, residual, out, blocks);
    return cudaGetLastError();
  });
}

cudaError_t WireDecode(WireCodec c, const uint8_t* in, size_t n, float* out, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!Aligned4(in)) return cudaErrorInvalidValue;
  const size_t blocks = Blocks(n);
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    DecodeKernel<C, false><<<Grid(blocks), kThreads, 0, stream>>>(in, n, out, blocks);
    return cudaGetLastError();
  });
}

cudaError_t WireDecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!Aligned4(in)) return cudaErrorInvalidValue;
  const size_t blocks = Blocks(n);
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    DecodeKernel<C, true><<<Grid(blocks), kThreads, 0, stream>>>(in, n, acc, blocks);
    return cudaGetLastError();
  });
}

size_t WireChunkMaskBytes(size_t n) { return (Blocks(n) + 7) / 8; }

cudaError_t WireChunkNonZeroMask(const float* data, const float* residual, size_t n, uint8_t* mask,
                                 cudaStream_t stream) {
  const size_t bytes = WireChunkMaskBytes(n);
  if (bytes == 0) return cudaSuccess;
  // At most kMaxGrid warps, i.e. 2048 mask bytes (4M floats) per round.
  const size_t blocks = CeilDiv<size_t>(bytes, kWarps);
  ChunkMaskKernel<<<Grid(blocks < kMaxGrid / kWarps ? blocks : kMaxGrid / kWarps), kThreads, 0,
                    stream>>>(data, residual, n, Blocks(n), mask, bytes);
  return cudaGetLastError();
}

cudaError_t WireEncodeChunks(WireCodec c, const float* data, size_t n, float* residual,
                             const uint32_t* active, size_t m, size_t slots, uint8_t* out,
                             cudaStream_t stream) {
  if (slots == 0) return cudaSuccess;
  if (!Aligned4(out) || m > slots) return cudaErrorInvalidValue;
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    EncodeChunksKernel<C>
        <<<Grid(slots), kThreads, 0, stream>>>(data, n, residual, active, m, slots, out);
    return cudaGetLastError();
  });
}

cudaError_t WireSumRuns(WireCodec c, const uint8_t* in, int g, size_t per, size_t run_bytes,
                        float* sum, cudaStream_t stream) {
  if (per == 0) return cudaSuccess;
  if (!Aligned4(in) || run_bytes % 4 != 0 || g < 1) return cudaErrorInvalidValue;
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    SumRunsKernel<C><<<Grid(per), kThreads, 0, stream>>>(in, g, per, run_bytes, sum);
    return cudaGetLastError();
  });
}

cudaError_t WireEncodeOwnedSums(WireCodec c, const float* sum, size_t per, size_t first, size_t m,
                                const uint32_t* active, size_t n, float* residual, uint8_t* out,
                                cudaStream_t stream) {
  if (per == 0) return cudaSuccess;
  if (!Aligned4(out)) return cudaErrorInvalidValue;
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    EncodeOwnedSumsKernel<C>
        <<<Grid(per), kThreads, 0, stream>>>(sum, per, first, m, active, n, residual, out);
    return cudaGetLastError();
  });
}

cudaError_t WireDecodeChunks(WireCodec c, const uint8_t* in, size_t m, const uint32_t* active,
                             size_t n, float* data, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (!Aligned4(in)) return cudaErrorInvalidValue;
  return WithCodec(c, [&](auto codec) {
    constexpr WireCodec C = decltype(codec)::value;
    DecodeChunksKernel<C><<<Grid(m), kThreads, 0, stream>>>(in, m, active, n, data);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::trainer::cuda
