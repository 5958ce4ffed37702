// CPU references of the CUDA trainer's half-precision casts (trainer/cuda/kernels/cast.cu), written
// from the IEEE 754 formats by bit manipulation, independently of the toolkit's conversions the
// kernels use: bf16 is fp32's top 16 bits (8-bit exponent, 7-bit mantissa), fp16 has a 5-bit
// exponent (bias 15) and a 10-bit mantissa. Both round to nearest, ties to even; fp16 overflows
// to ±inf (from 65520 up, the halfway point above 65504) and keeps subnormals down to 2^-24.
#pragma once

#include <cstdint>
#include <cstring>

namespace ringmaster::trainer::cpu {

inline uint32_t FloatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline uint16_t Bf16Bits(float x) {
  const uint32_t u = FloatBits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // qNaN
  const uint32_t lower = u & 0xffffu, keep = u >> 16;
  const bool up = lower > 0x8000u || (lower == 0x8000u && (keep & 1u));
  return static_cast<uint16_t>(keep + (up ? 1u : 0u));  // a carry into the exponent is right
}
inline float Bf16ToFloat(uint16_t h) { return BitsFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t Fp16Bits(float x) {
  const uint32_t u = FloatBits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;  // NaN
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp > 15) return sign | 0x7c00u;  // beyond the largest binade (inf included)
  // The value as an integer number of fp16 quanta: normal binades have 10 mantissa bits; below
  // 2^-14 the quantum stays 2^-24 (subnormals).
  const uint32_t mant = (a & 0x7fffffu) | (a >= 0x00800000u ? 0x800000u : 0u);
  const int e_eff = exp < -14 ? -14 : exp;
  const int shift = 13 + (e_eff - exp);  // bits of the 24-bit significand to drop
  if (shift > 24) return sign;           // below half the smallest subnormal
  const uint32_t kept = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  uint32_t q = kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
  // q counts quanta of 2^(e_eff-10); the fp16 encoding of that is (e_eff+15-1)<<10 + q for
  // normals (q includes the implicit 1 as 1<<10) and q for subnormals: both are the same sum.
  const uint32_t bits = (exp < -14 ? 0u : static_cast<uint32_t>(e_eff + 14) << 10) + q;
  return sign | static_cast<uint16_t>(bits >= 0x7c00u ? 0x7c00u : bits);
}
inline float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const int e = (h >> 10) & 0x1f;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return BitsFloat(sign | 0x7f800000u | (m << 13));
  float v = e == 0 ? static_cast<float>(m) * (1.0f / 16777216.0f)
                   : (1.0f + static_cast<float>(m) / 1024.0f) * BitsFloat((e + 112u) << 23);
  return sign != 0 ? -v : v;
}

}  // namespace ringmaster::trainer::cpu
