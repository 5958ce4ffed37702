// fp16/bf16/int8 element codecs with error feedback (wire_codec.h).
#include "trainer/parallel/wire_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

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

}  // namespace ringmaster::trainer
