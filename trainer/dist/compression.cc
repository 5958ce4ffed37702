// Gradient compression for the data-parallel wire: fp16/bf16/int8 element codecs with error
// feedback, and PowerSGD low-rank compression (sum semantics) over a caller-given allreduce.
#include "trainer/dist/compression.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace {

// ---- Little-endian byte access: plain (vectorisable) loads/stores on little-endian hosts. ----

constexpr bool kLittleEndian = std::endian::native == std::endian::little;

inline void StoreU16(uint8_t* p, uint16_t v) {
  if constexpr (kLittleEndian) {
    std::memcpy(p, &v, 2);
  } else {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
  }
}
inline uint16_t LoadU16(const uint8_t* p) {
  if constexpr (kLittleEndian) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  } else {
    return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
  }
}
inline void StoreF32(uint8_t* p, float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if constexpr (kLittleEndian) {
    std::memcpy(p, &u, 4);
  } else {
    p[0] = static_cast<uint8_t>(u);
    p[1] = static_cast<uint8_t>(u >> 8);
    p[2] = static_cast<uint8_t>(u >> 16);
    p[3] = static_cast<uint8_t>(u >> 24);
  }
}
inline float LoadF32(const uint8_t* p) {
  uint32_t u;
  if constexpr (kLittleEndian) {
    std::memcpy(&u, p, 4);
  } else {
    u = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
        (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }
  return std::bit_cast<float>(u);
}

// ---- fp16 (IEEE binary16) ----
// Integer-only and branch-free (every case computed, then selected) so that the loops
// vectorise.

// Round-to-nearest-even; subnormals kept; |x| >= 65520 (which would round to inf) and ±inf
// saturate to ±65504; NaN becomes a quiet NaN.
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t u = bits & 0x7fffffffu;
  const int32_t a = static_cast<int32_t>(u);  // |f| as ordered integer bits
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // 0xc8000000 = -112 << 23
  // Below 2^-14 (fp16 subnormal or zero): code = mant * 2^(exp - 126) rounded to nearest even,
  // i.e. mant >> (126 - exp) with the same rounding; shifts past 31 give 0 (as does an fp32
  // subnormal). Other lanes compute garbage here that the selects below discard.
  const uint32_t shift = std::min(static_cast<uint32_t>(126 - (a >> 23)), 31u);
  const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  const uint32_t sub = (mant + ((1u << shift) >> 1) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);  // quiet bit set, top payload bits kept
  uint32_t o = a < 0x38800000 ? sub : normal;
  o = a >= 0x477ff000 ? 0x7bffu : o;  // >= 65520 (incl. inf): saturate at 65504
  o = a > 0x7f800000 ? nan : o;
  return static_cast<uint16_t>(sign | o);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // All-ones masks (GCC vectorises mask arithmetic here, not a chain of ?: selects).
  const uint32_t is_infnan = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  const uint32_t is_normal = 0u - static_cast<uint32_t>(em >= 0x0400u);
  // Exponent 15 -> 127 (and 31 -> 255 for inf/NaN, payload kept).
  const uint32_t normal = (em << 13) + 0x38000000u + (is_infnan & 0x38000000u);
  const uint32_t sub =  // subnormal or zero: em * 2^-24, exact
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  return std::bit_cast<float>(((normal & is_normal) | (sub & ~is_normal)) | sign);
}

// ---- bf16 ----

inline uint16_t FloatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;  // quiet: a payload only in the low bits stays NaN
  return static_cast<uint16_t>(static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000 ? nan : rounded);
}

inline float Bf16ToFloat(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline float FiniteOrZero(float v) { return std::isfinite(v) ? v : 0.0f; }

// GCC's default for GNU dialects (-ffp-contract=fast) fuses `y - code * scale` and
// `acc + code * scale` into FMAs, which skips the rounding of the decoded value: the residual
// would then not be y minus what the receiver sees, and DecodeAdd would differ from Decode + add.
// The int8 loops therefore round the product on its own. (fp16/bf16 decoding has no inexact
// product.)
#if defined(__GNUC__) && !defined(__clang__)
#define RM_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define RM_NO_FP_CONTRACT
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

// ---- Codec bodies. `to`/`from` are lambdas, inlined into the loops. ----

template <typename To, typename From>
void Encode16(const float* x, size_t n, float* residual, uint8_t* out, To to, From from) {
  if (residual == nullptr) {
    for (size_t i = 0; i < n; ++i) StoreU16(out + 2 * i, to(x[i]));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float y = x[i] + residual[i];
    const uint16_t h = to(y);
    StoreU16(out + 2 * i, h);
    residual[i] = FiniteOrZero(y - from(h));
  }
}

template <bool kAdd, typename From>
void Decode16(const uint8_t* in, size_t n, float* out, From from) {
  for (size_t i = 0; i < n; ++i) {
    const float v = from(LoadU16(in + 2 * i));
    if constexpr (kAdd) {
      out[i] += v;
    } else {
      out[i] = v;
    }
  }
}

size_t Int8Blocks(size_t n) { return (n + kInt8BlockSize - 1) / kInt8BlockSize; }

RM_NO_FP_CONTRACT void EncodeInt8(const float* x, size_t n, float* residual, uint8_t* out) {
  const size_t blocks = Int8Blocks(n);
  uint8_t* codes = out + 4 * blocks;
  float ybuf[kInt8BlockSize];
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kInt8BlockSize;
    const size_t len = std::min(kInt8BlockSize, n - begin);
    const float* y = x + begin;
    if (residual != nullptr) {
      for (size_t i = 0; i < len; ++i) ybuf[i] = x[begin + i] + residual[begin + i];
      y = ybuf;
    }
    // max |y| on the bit patterns: for non-negative floats integer order is float order, and
    // inf/NaN compare above every finite value.
    int32_t amax_bits = 0;
    for (size_t i = 0; i < len; ++i) {
      const int32_t a = std::bit_cast<int32_t>(y[i]) & 0x7fffffff;
      amax_bits = a > amax_bits ? a : amax_bits;
    }
    const bool finite = amax_bits <= 0x7f7fffff;  // FLT_MAX
    const float amax = std::bit_cast<float>(amax_bits);
    // A non-finite block gets a NaN scale and zero codes: it decodes to NaN (visible overflow).
    const bool tiny = finite && amax < std::numeric_limits<float>::min();
    const float scale = !finite ? std::numeric_limits<float>::quiet_NaN()
                        : tiny  ? 0.0f
                                : amax / 127.0f;
    StoreF32(out + 4 * b, scale);
    int8_t* c = reinterpret_cast<int8_t*>(codes + begin);
    if (!finite || tiny) {
      // All-zero block, or one whose every |y| is subnormal (< 2^-126): every code is 0 and the
      // residual is cleared. Values that small move no weight, and carrying them would keep a
      // block non-zero (and sent by zero-chunk skipping) forever: with scale = amax/127 they
      // never round away.
      std::memset(c, 0, len);
      if (residual != nullptr) std::fill_n(residual + begin, len, 0.0f);
      continue;
    }
    for (size_t i = 0; i < len; ++i) {
      // Round half away from zero (std::round, written so that it vectorises): q - trunc(q) is
      // exact, unlike q + 0.5 which can round up across the half. |q| <= 127 up to the rounding
      // of scale (at most ~254 when scale is subnormal), so the int conversion is safe.
      const float q = y[i] / scale;
      int t = static_cast<int>(q);
      const float frac = q - static_cast<float>(t);
      t += frac >= 0.5f;
      t -= frac <= -0.5f;
      c[i] = static_cast<int8_t>(std::min(127, std::max(-127, t)));
    }
    if (residual != nullptr) {
      for (size_t i = 0; i < len; ++i) {
        residual[begin + i] = y[i] - static_cast<float>(c[i]) * scale;
      }
    }
  }
}

template <bool kAdd>
RM_NO_FP_CONTRACT void DecodeInt8(const uint8_t* in, size_t n, float* out) {
  const size_t blocks = Int8Blocks(n);
  const int8_t* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kInt8BlockSize;
    const size_t len = std::min(kInt8BlockSize, n - begin);
    const float scale = LoadF32(in + 4 * b);
    for (size_t i = begin; i < begin + len; ++i) {
      const float v = static_cast<float>(codes[i]) * scale;
      if constexpr (kAdd) {
        out[i] += v;
      } else {
        out[i] = v;
      }
    }
  }
}

template <bool kAdd>
void DecodeImpl(WireCodec c, const uint8_t* in, size_t n, float* out) {
  switch (c) {
    case WireCodec::kNone:
      for (size_t i = 0; i < n; ++i) {
        const float v = LoadF32(in + 4 * i);
        if constexpr (kAdd) {
          out[i] += v;
        } else {
          out[i] = v;
        }
      }
      return;
    case WireCodec::kFp16:
      Decode16<kAdd>(in, n, out, HalfToFloat);
      return;
    case WireCodec::kBf16:
      Decode16<kAdd>(in, n, out, Bf16ToFloat);
      return;
    case WireCodec::kInt8:
      DecodeInt8<kAdd>(in, n, out);
      return;
  }
}

}  // namespace

absl::StatusOr<WireCodec> ParseWireCodec(std::string_view name) {
  for (WireCodec c : {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    if (name == WireCodecName(c)) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown wire codec \"",
                                                 absl::string_view(name.data(), name.size()),
                                                 "\" (expected none, fp16, bf16 or int8)"));
}

std::string_view WireCodecName(WireCodec c) {
  switch (c) {
    case WireCodec::kNone:
      return "none";
    case WireCodec::kFp16:
      return "fp16";
    case WireCodec::kBf16:
      return "bf16";
    case WireCodec::kInt8:
      return "int8";
  }
  return "unknown";
}

size_t EncodedBytes(WireCodec c, size_t n) {
  switch (c) {
    case WireCodec::kNone:
      return 4 * n;
    case WireCodec::kFp16:
    case WireCodec::kBf16:
      return 2 * n;
    case WireCodec::kInt8:
      return 4 * Int8Blocks(n) + n;
  }
  return 0;
}

void Encode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out) {
  switch (c) {
    case WireCodec::kNone:
      for (size_t i = 0; i < n; ++i) {
        const float y = residual != nullptr ? x[i] + residual[i] : x[i];
        StoreF32(out + 4 * i, y);
        if (residual != nullptr) residual[i] = 0.0f;  // sent exactly
      }
      return;
    case WireCodec::kFp16:
      Encode16(x, n, residual, out, FloatToHalf, HalfToFloat);
      return;
    case WireCodec::kBf16:
      Encode16(x, n, residual, out, FloatToBf16, Bf16ToFloat);
      return;
    case WireCodec::kInt8:
      EncodeInt8(x, n, residual, out);
      return;
  }
}

void Decode(WireCodec c, const uint8_t* in, size_t n, float* out) {
  DecodeImpl<false>(c, in, n, out);
}

void DecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc) {
  DecodeImpl<true>(c, in, n, acc);
}

namespace {
constexpr size_t kChunk = kInt8BlockSize;  // TwoStageAllReduce's unit of skipping and encoding

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// True when data[0..len) or residual[0..len) (when given) holds a value that is not ±0 (NaN
// included).
bool ChunkIsNonZero(const float* data, const float* residual, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (data[i] != 0.0f) return true;
  }
  if (residual != nullptr) {
    for (size_t i = 0; i < len; ++i) {
      if (residual[i] != 0.0f) return true;
    }
  }
  return false;
}
}  // namespace

size_t TwoStageWireBytes(WireCodec codec, size_t active, size_t chunks, int g, bool skip) {
  const size_t peers = static_cast<size_t>(g) - 1;
  if (peers == 0) return 0;
  const size_t per = CeilDiv(active, static_cast<size_t>(g));
  return 2 * EncodedBytes(codec, per * kChunk) * peers + (skip ? CeilDiv(chunks, 8) * peers : 0);
}

absl::Status TwoStageAllReduce(WireCodec codec, int g, int rank, float* data, size_t n,
                               float* residual, bool skip, TwoStageScratch& sc,
                               const AllToAllFn& all_to_all, const AllGatherFn& all_gather,
                               TwoStageStats* stats) {
  if (g < 1 || rank < 0 || rank >= g) {
    return absl::InvalidArgumentError(
        absl::StrCat("TwoStageAllReduce: rank ", rank, " of ", g, " ranks"));
  }
  const size_t gs = static_cast<size_t>(g);
  const size_t me = static_cast<size_t>(rank);
  const size_t chunks = CeilDiv(n, kChunk);
  auto chunk_len = [&](size_t c) { return std::min(kChunk, n - c * kChunk); };

  // Which chunks take part: all of them, or those some rank has a non-zero value in.
  sc.active.clear();
  if (skip) {
    const size_t mask_bytes = CeilDiv(chunks, 8);
    sc.mask.assign(mask_bytes, 0);
    for (size_t c = 0; c < chunks; ++c) {
      const float* res = residual != nullptr ? residual + c * kChunk : nullptr;
      if (ChunkIsNonZero(data + c * kChunk, res, chunk_len(c))) {
        sc.mask[c / 8] |= static_cast<uint8_t>(1u << (c % 8));
      }
    }
    sc.masks.resize(mask_bytes * gs);
    if (mask_bytes > 0) RM_RETURN_IF_ERROR(all_gather(sc.mask.data(), sc.masks.data(), mask_bytes));
    for (size_t r = 1; r < gs; ++r) {
      for (size_t i = 0; i < mask_bytes; ++i) sc.masks[i] |= sc.masks[r * mask_bytes + i];
    }
    for (size_t c = 0; c < chunks; ++c) {
      if ((sc.masks[c / 8] >> (c % 8)) & 1u) sc.active.push_back(static_cast<uint32_t>(c));
    }
  } else {
    sc.active.resize(chunks);
    for (size_t c = 0; c < chunks; ++c) sc.active[c] = static_cast<uint32_t>(c);
  }
  const size_t m = sc.active.size();
  if (stats != nullptr) {
    stats->chunks = chunks;
    stats->active_chunks = m;
    stats->wire_bytes = TwoStageWireBytes(codec, m, chunks, g, skip);
  }
  if (m == 0) return absl::OkStatus();  // zero everywhere: the sum is data as it is

  const size_t per = CeilDiv(m, gs);              // chunks per rank's run
  const size_t cb = EncodedBytes(codec, kChunk);  // bytes per encoded chunk
  const size_t bytes = per * cb;                  // bytes per rank's run
  sc.send.resize(bytes * gs);
  sc.recv.resize(bytes * gs);
  sc.sum.resize(per * kChunk);
  sc.tail.resize(kChunk);
  sc.tail_residual.resize(kChunk);
  // Encodes chunk c (+ its residual, updated) into out; a short last chunk goes through the
  // zero-padded tail buffers.
  auto encode_chunk = [&](size_t c, uint8_t* out) {
    const size_t len = chunk_len(c);
    float* src = data + c * kChunk;
    float* res = residual != nullptr ? residual + c * kChunk : nullptr;
    if (len == kChunk) {
      Encode(codec, src, kChunk, res, out);
      return;
    }
    std::fill(std::copy_n(src, len, sc.tail.begin()), sc.tail.end(), 0.0f);
    float* tail_res = nullptr;
    if (res != nullptr) {
      std::fill(std::copy_n(res, len, sc.tail_residual.begin()), sc.tail_residual.end(), 0.0f);
      tail_res = sc.tail_residual.data();
    }
    Encode(codec, sc.tail.data(), kChunk, tail_res, out);
    if (res != nullptr) std::copy_n(sc.tail_residual.data(), len, res);
  };

  // Stage 1, reduce-scatter: run r = active chunks [r·per, (r+1)·per) goes to rank r. All-zero
  // bytes decode to +0 in every codec, so padding chunks are zero-filled.
  for (size_t v = 0; v < per * gs; ++v) {
    uint8_t* out = sc.send.data() + v * cb;
    if (v < m) {
      encode_chunk(sc.active[v], out);
    } else {
      std::memset(out, 0, cb);
    }
  }
  RM_RETURN_IF_ERROR(all_to_all(sc.send.data(), sc.recv.data(), bytes));
  for (size_t k = 0; k < per; ++k) {
    Decode(codec, sc.recv.data() + k * cb, kChunk, sc.sum.data() + k * kChunk);
    for (size_t r = 1; r < gs; ++r) {
      DecodeAdd(codec, sc.recv.data() + r * bytes + k * cb, kChunk, sc.sum.data() + k * kChunk);
    }
  }

  // Stage 2, all-gather of the encoded sums. The owner's rounding error of a sum goes into its
  // residual at that chunk's positions.
  uint8_t* mine = sc.send.data();  // stage 1's send buffer is free again
  for (size_t k = 0; k < per; ++k) {
    const size_t v = me * per + k;
    float* sum = sc.sum.data() + k * kChunk;
    if (residual == nullptr || v >= m) {
      Encode(codec, sum, kChunk, nullptr, mine + k * cb);
      continue;
    }
    std::fill(sc.tail_residual.begin(), sc.tail_residual.end(), 0.0f);
    Encode(codec, sum, kChunk, sc.tail_residual.data(), mine + k * cb);
    const size_t c = sc.active[v];
    float* res = residual + c * kChunk;
    for (size_t i = 0, len = chunk_len(c); i < len; ++i) res[i] += sc.tail_residual[i];
  }
  RM_RETURN_IF_ERROR(all_gather(mine, sc.recv.data(), bytes));
  for (size_t r = 0; r < gs; ++r) {
    for (size_t k = 0; k < per; ++k) {
      const size_t v = r * per + k;
      if (v >= m) break;
      const size_t c = sc.active[v];
      const size_t len = chunk_len(c);
      const uint8_t* in = sc.recv.data() + r * bytes + k * cb;
      if (len == kChunk) {
        Decode(codec, in, kChunk, data + c * kChunk);
      } else {
        Decode(codec, in, kChunk, sc.tail.data());
        std::copy_n(sc.tail.data(), len, data + c * kChunk);
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// PowerSGD

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Standard normal values from (seed, stream) only: the same on every rank and platform (own
// generator and Box-Muller rather than the implementation-defined std::normal_distribution).
void FillNormal(uint64_t seed, uint64_t stream, float* out, size_t n) {
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (stream + 1));
  SplitMix64(state);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

// a * b, or SIZE_MAX on overflow.
size_t SatMul(size_t a, size_t b) {
  size_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<size_t>::max() : r;
}

// Orthonormalises the columns of the row-major rows x r matrix `p` (r <= rows) in double:
// modified Gram-Schmidt with one re-orthogonalisation pass. A column that is zero, non-finite or
// (numerically) in the span of the previous ones is replaced by the unit vector e_k least covered
// by the previous columns, orthogonalised, so the result always has r orthonormal columns.
// `work` is scratch.
void Orthonormalise(float* p, size_t rows, size_t r, std::vector<double>& work) {
  work.resize(rows * r);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < r; ++j) work[j * rows + i] = p[i * r + j];  // column-major
  }
  auto norm = [rows](const double* v) {
    double s = 0;
    for (size_t i = 0; i < rows; ++i) s += v[i] * v[i];
    return std::sqrt(s);
  };
  auto project_out = [rows, &work](double* v, size_t j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        const double* u = &work[k * rows];
        double d = 0;
        for (size_t i = 0; i < rows; ++i) d += u[i] * v[i];
        for (size_t i = 0; i < rows; ++i) v[i] -= d * u[i];
      }
    }
  };
  constexpr double kRelTol = 1e-6;
  for (size_t j = 0; j < r; ++j) {
    double* v = &work[j * rows];
    const double n0 = norm(v);
    bool ok = std::isfinite(n0) && n0 > 0;
    double n1 = 0;
    if (ok) {
      project_out(v, j);
      n1 = norm(v);
      ok = n1 > kRelTol * n0;
    }
    if (!ok) {
      // e_k with the smallest squared mass in the previous columns: its remainder after projection
      // has squared norm >= 1 - j/rows > 0.
      size_t best = 0;
      double best_mass = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < rows; ++i) {
        double mass = 0;
        for (size_t k = 0; k < j; ++k) mass += work[k * rows + i] * work[k * rows + i];
        if (mass < best_mass) {
          best_mass = mass;
          best = i;
        }
      }
      std::fill(v, v + rows, 0.0);
      v[best] = 1.0;
      project_out(v, j);
      n1 = norm(v);
    }
    for (size_t i = 0; i < rows; ++i) v[i] /= n1;
  }
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < r; ++j) p[i * r + j] = static_cast<float>(work[j * rows + i]);
  }
}

}  // namespace

PowerSgd::PowerSgd(std::vector<MatrixRange> matrices, size_t total, PowerSgdOptions options)
    : total_(total), options_(options) {
  if (options.rank < 1) {
    init_status_ =
        absl::InvalidArgumentError(absl::StrCat("PowerSgd: rank must be >= 1, got ", options.rank));
    return;
  }
  if (options.min_compression_rate < 0) {
    init_status_ = absl::InvalidArgumentError(absl::StrCat(
        "PowerSgd: min_compression_rate must be >= 0, got ", options.min_compression_rate));
    return;
  }
  // Validate ranges: inside [0, total), no overlaps among non-empty matrices.
  std::vector<std::pair<size_t, size_t>> intervals;  // [begin, end) of every non-empty matrix
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    size_t size;
    if (__builtin_mul_overflow(m.rows, m.cols, &size) || m.offset > total ||
        size > total - m.offset) {
      init_status_ = absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrix ", i, " (offset ", m.offset, ", ", m.rows, "x", m.cols,
                       ") does not fit in a buffer of ", total, " floats"));
      return;
    }
    if (size > 0) intervals.emplace_back(m.offset, m.offset + size);
  }
  std::sort(intervals.begin(), intervals.end());
  for (size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].first < intervals[i - 1].second) {
      init_status_ = absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrices overlap at element ", intervals[i].first));
      return;
    }
  }

  // Choose the compressed matrices (in the caller's order: the index seeds Q).
  std::vector<std::pair<size_t, size_t>> compressed_intervals;
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    const size_t r = std::min({static_cast<size_t>(options.rank), m.rows, m.cols});
    if (r == 0) continue;
    if (m.rows > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        m.cols > static_cast<size_t>(std::numeric_limits<int>::max())) {
      init_status_ = absl::InvalidArgumentError(absl::StrCat(
          "PowerSgd: matrix ", i, " is too large for BLAS (", m.rows, "x", m.cols, ")"));
      return;
    }
    const size_t size = m.rows * m.cols;
    const size_t threshold =
        SatMul(SatMul(static_cast<size_t>(options.min_compression_rate), m.rows + m.cols), r);
    if (size < threshold) continue;  // too small to gain: sent exactly
    Compressed c;
    c.index = i;
    c.offset = m.offset;
    c.rows = m.rows;
    c.cols = m.cols;
    c.rank = r;
    c.p_offset = p_floats_;
    c.q_offset = q_floats_;
    c.m_offset = m_floats_;
    m_floats_ += size;
    p_floats_ += m.rows * r;
    q_floats_ += m.cols * r;
    c.residual.assign(size, 0.0f);
    c.q.resize(m.cols * r);
    FillNormal(options.seed, i, c.q.data(), c.q.size());
    compressed_intervals.emplace_back(m.offset, m.offset + size);
    compressed_.push_back(std::move(c));
  }
  std::sort(compressed_intervals.begin(), compressed_intervals.end());
  size_t pos = 0;
  for (const auto& [begin, end] : compressed_intervals) {
    if (begin > pos) uncompressed_.push_back({pos, begin - pos});
    pos = end;
  }
  if (total > pos) uncompressed_.push_back({pos, total - pos});
  for (const Span& s : uncompressed_) uncompressed_floats_ += s.size;
}

size_t PowerSgd::wire_floats_per_call() const {
  return uncompressed_floats_ + p_floats_ + q_floats_;
}

absl::Status PowerSgd::AllReduce(float* grads, int world_size,
                                 const std::function<absl::Status(float*, size_t)>& allreduce_sum) {
  RM_RETURN_IF_ERROR(init_status_);
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSgd::AllReduce: world_size must be >= 1, got ", world_size));
  }
  if (total_ > 0 && grads == nullptr) {
    return absl::InvalidArgumentError("PowerSgd::AllReduce: grads is null");
  }
  if (!allreduce_sum) return absl::InvalidArgumentError("PowerSgd::AllReduce: no allreduce_sum");

  // Nothing is written to grads, residuals or Q until every collective has succeeded.
  // 1. Uncompressed elements, packed.
  if (uncompressed_floats_ > 0) {
    unc_buf_.resize(uncompressed_floats_);
    float* dst = unc_buf_.data();
    for (const Span& s : uncompressed_) {
      std::memcpy(dst, grads + s.offset, s.size * sizeof(float));
      dst += s.size;
    }
    RM_RETURN_IF_ERROR(allreduce_sum(unc_buf_.data(), uncompressed_floats_));
  }

  // 2. P = sum_ranks M Q, with M = G + E formed once in scratch (one GEMM per product rather
  //    than G Q + E Q: OpenBLAS copies the whole left operand to pack it, so each GEMM costs
  //    about a pass over the matrix). Grads and residuals stay untouched until the collectives
  //    have succeeded.
  p_buf_.resize(p_floats_);
  q_buf_.resize(q_floats_);
  m_buf_.resize(m_floats_);
  for (const Compressed& c : compressed_) {
    const size_t size = c.rows * c.cols;
    const float* g = grads + c.offset;
    const float* e = c.residual.data();
    float* mm = m_buf_.data() + c.m_offset;
    for (size_t k = 0; k < size; ++k) mm[k] = g[k] + e[k];
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, r, n, 1.0f, mm, n, c.q.data(), r,
                0.0f, p_buf_.data() + c.p_offset, r);
  }
  if (p_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(p_buf_.data(), p_floats_));

  // 3. Orthonormalise each P (identical input on every rank, so identical output).
  // 4. Q' = sum_ranks M^T P.
  for (const Compressed& c : compressed_) {
    float* p = p_buf_.data() + c.p_offset;
    Orthonormalise(p, c.rows, c.rank, gs_work_);
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, r, m, 1.0f, m_buf_.data() + c.m_offset,
                n, p, r, 0.0f, q_buf_.data() + c.q_offset, r);
  }
  if (q_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(q_buf_.data(), q_floats_));

  // 5. Commit. Uncompressed sums go back in place.
  const float* src = unc_buf_.data();
  for (const Span& s : uncompressed_) {
    std::memcpy(grads + s.offset, src, s.size * sizeof(float));
    src += s.size;
  }
  const float inv_world = 1.0f / static_cast<float>(world_size);
  for (Compressed& c : compressed_) {
    const size_t size = c.rows * c.cols;
    float* g = grads + c.offset;
    float* e = c.residual.data();
    const float* mm = m_buf_.data() + c.m_offset;
    const float* p = p_buf_.data() + c.p_offset;
    const float* q = q_buf_.data() + c.q_offset;
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    // grads = M^ = P Q'^T; new residual e = M - M^ / world_size.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, r, 1.0f, p, r, q, r, 0.0f, g, n);
    for (size_t k = 0; k < size; ++k) e[k] = FiniteOrZero(mm[k] - g[k] * inv_world);
    // Warm start: Q' with unit columns (same span for the next P, bounded magnitudes). A
    // non-finite Q' (a NaN/inf gradient this step) restarts from the seeded Q instead.
    bool finite = true;
    for (size_t k = 0; k < c.q.size(); ++k) finite &= std::isfinite(q[k]);
    if (!finite) {
      FillNormal(options_.seed, c.index, c.q.data(), c.q.size());
      continue;
    }
    for (size_t j = 0; j < c.rank; ++j) {
      double s = 0;
      for (size_t i = 0; i < c.cols; ++i)
        s += static_cast<double>(q[i * c.rank + j]) * q[i * c.rank + j];
      const double scale = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
      for (size_t i = 0; i < c.cols; ++i) {
        c.q[i * c.rank + j] = static_cast<float>(q[i * c.rank + j] * scale);
      }
    }
  }
  return absl::OkStatus();
}

size_t PowerSgd::held_bytes() const {
  size_t floats = unc_buf_.capacity() + p_buf_.capacity() + q_buf_.capacity() + m_buf_.capacity();
  for (const Compressed& c : compressed_) floats += c.residual.capacity() + c.q.capacity();
  return floats * sizeof(float) + gs_work_.capacity() * sizeof(double);
}

std::vector<float> PowerSgd::State() const {
  std::vector<float> s;
  size_t size = 0;
  for (const Compressed& c : compressed_) size += c.residual.size() + c.q.size();
  s.reserve(size);
  for (const Compressed& c : compressed_) {
    s.insert(s.end(), c.residual.begin(), c.residual.end());
    s.insert(s.end(), c.q.begin(), c.q.end());
  }
  return s;
}

absl::Status PowerSgd::SetState(const std::vector<float>& s) {
  RM_RETURN_IF_ERROR(init_status_);
  size_t size = 0;
  for (const Compressed& c : compressed_) size += c.residual.size() + c.q.size();
  if (s.size() != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSgd::SetState: expected ", size, " floats, got ", s.size()));
  }
  const float* src = s.data();
  for (Compressed& c : compressed_) {
    std::copy(src, src + c.residual.size(), c.residual.begin());
    src += c.residual.size();
    std::copy(src, src + c.q.size(), c.q.begin());
    src += c.q.size();
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
