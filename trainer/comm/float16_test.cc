// The fp32 <-> bf16/fp16 conversions the CPU backends sum 16-bit elements with: every fp16 and
// bf16 code round-trips, and fp32 -> fp16 agrees with the compiler's own _Float16 conversion
// (IEEE round-to-nearest-even) on values across the whole range, ties and overflow included.
#include "trainer/comm/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace ringmaster::trainer {
namespace {

TEST(Float16Test, EveryFp16CodeRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f)))) << h;
      continue;
    }
    EXPECT_EQ(Fp32ToFp16(f), h) << "code " << h << " value " << f;
  }
}

TEST(Float16Test, EveryBf16CodeRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(f)))) << h;
      continue;
    }
    EXPECT_EQ(Fp32ToBf16(f), h) << h;
  }
}

TEST(Float16Test, KnownRoundings) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7bff);  // below the tie: largest finite
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(Fp32ToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(Fp32ToFp16(0x1p-24f), 0x0001);                    // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(0x1p-25f), 0x0000);                    // tie between 0 and 2^-24: even (0)
  EXPECT_EQ(Fp32ToFp16(1.0f + 0x1p-11f), 0x3c00);             // tie: even
  EXPECT_EQ(Fp32ToFp16(1.0f + 0x1p-10f + 0x1p-11f), 0x3c02);  // tie: even (up)
  EXPECT_EQ(Fp32ToBf16(1.0f + 0x1p-8f), 0x3f80);              // tie: even
  EXPECT_EQ(Fp32ToBf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
}

#if defined(__FLT16_MAX__)
TEST(Float16Test, Fp32ToFp16MatchesTheCompilersConversion) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    // Random bits over the exponents fp16 can reach and a little beyond (both signs).
    const uint32_t exp = 100 + rng() % 50;  // 2^-27 .. 2^22
    const uint32_t bits = (rng() & 0x80000000u) | (exp << 23) | (rng() & 0x7fffffu);
    const float f = std::bit_cast<float>(bits);
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(Fp32ToFp16(f), want) << f;
  }
}
#endif

}  // namespace
}  // namespace ringmaster::trainer
