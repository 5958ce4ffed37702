// Scalar conversions between fp32 and the 16-bit float types of DataType (kBFloat16, kFloat16):
// IEEE round-to-nearest-even, overflow to infinity, NaN kept (quiet). The CPU backends use them
// to sum 16-bit elements in fp32; they are not vectorised (the wire codecs in
// trainer/parallel/compression.h have their own, saturating, fast paths).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ringmaster::trainer {

inline uint16_t Fp32ToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t Fp32ToFp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);  // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past 65504: infinity
  if (a >= 0x38800000u) {                       // a normal fp16 (>= 2^-14)
    // Rebias the exponent (127 -> 15: subtract 112 << 23) and round the 13 dropped bits to
    // nearest even; a carry out of the mantissa correctly bumps the exponent.
    return sign | static_cast<uint16_t>((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13);
  }
  // Subnormal or zero: the code is |f| / 2^-24 rounded to nearest even (exact scaling by 2^24;
  // lrint rounds in the default mode, to nearest even). 2^-14 itself rounds up to code 0x400.
  return sign | static_cast<uint16_t>(std::lrint(std::bit_cast<float>(a) * 0x1p24f));
}

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

}  // namespace ringmaster::trainer
