// Tests for the gradient-compression codecs: fp16/bf16 casts and blockwise int8 with error
// feedback (PowerSGD has its own file, powersgd_test.cc).
#include "trainer/parallel/wire_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace ringmaster::trainer {
namespace {

constexpr WireCodec kAllCodecs[] = {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16,
                                    WireCodec::kInt8};

std::vector<uint8_t> EncodeVec(WireCodec c, const std::vector<float>& x,
                               float* residual = nullptr) {
  std::vector<uint8_t> out(EncodedBytes(c, x.size()));
  Encode(c, x.data(), x.size(), residual, out.data());
  return out;
}

std::vector<float> DecodeVec(WireCodec c, const std::vector<uint8_t>& in, size_t n) {
  std::vector<float> out(n);
  Decode(c, in.data(), n, out.data());
  return out;
}

uint16_t Half(float x) {
  std::vector<uint8_t> b = EncodeVec(WireCodec::kFp16, {x});
  return static_cast<uint16_t>(b[0] | (b[1] << 8));
}
uint16_t Bf16(float x) {
  std::vector<uint8_t> b = EncodeVec(WireCodec::kBf16, {x});
  return static_cast<uint16_t>(b[0] | (b[1] << 8));
}
float FromHalf(uint16_t h) {
  const uint8_t b[2] = {static_cast<uint8_t>(h), static_cast<uint8_t>(h >> 8)};
  float out;
  Decode(WireCodec::kFp16, b, 1, &out);
  return out;
}

// Mixed test data: zeros, negatives, tiny, huge (for the codec's range), normal-ish values.
std::vector<float> MixedData(size_t n, uint64_t seed, double max_abs, double min_abs) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_mag(std::log10(min_abs), std::log10(max_abs));
  std::uniform_int_distribution<int> kind(0, 9);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const int k = kind(rng);
    if (k == 0) {
      x[i] = 0.0f;
    } else {
      const double v = std::pow(10.0, log_mag(rng));
      x[i] = static_cast<float>(k % 2 == 0 ? -v : v);
    }
  }
  return x;
}

TEST(WireCodecTest, ParseAndName) {
  for (WireCodec c : kAllCodecs) {
    absl::StatusOr<WireCodec> parsed = ParseWireCodec(WireCodecName(c));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(WireCodecName(WireCodec::kFp16), "fp16");
  EXPECT_EQ(WireCodecName(WireCodec::kInt8), "int8");
  EXPECT_EQ(ParseWireCodec("int4").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseWireCodec("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WireCodecTest, EncodedBytes) {
  for (size_t n : {0, 1, 7, 256, 257, 1000}) {
    EXPECT_EQ(EncodedBytes(WireCodec::kNone, n), 4 * n);
    EXPECT_EQ(EncodedBytes(WireCodec::kFp16, n), 2 * n);
    EXPECT_EQ(EncodedBytes(WireCodec::kBf16, n), 2 * n);
  }
  EXPECT_EQ(EncodedBytes(WireCodec::kInt8, 0), 0u);
  EXPECT_EQ(EncodedBytes(WireCodec::kInt8, 1), 5u);
  EXPECT_EQ(EncodedBytes(WireCodec::kInt8, 256), 260u);
  EXPECT_EQ(EncodedBytes(WireCodec::kInt8, 257), 8u + 257u);
  EXPECT_EQ(EncodedBytes(WireCodec::kInt8, 1000), 16u + 1000u);
}

TEST(WireCodecTest, NoneIsExactLittleEndianFp32) {
  std::vector<float> x = MixedData(100, 1, 1e30, 1e-30);
  std::vector<uint8_t> enc = EncodeVec(WireCodec::kNone, x);
  uint32_t u0 = std::bit_cast<uint32_t>(x[0]);
  EXPECT_EQ(enc[0], u0 & 0xff);
  EXPECT_EQ(enc[3], u0 >> 24);
  EXPECT_EQ(DecodeVec(WireCodec::kNone, enc, x.size()), x);
}

TEST(WireCodecTest, Fp16KnownValues) {
  EXPECT_EQ(Half(0.0f), 0x0000);
  EXPECT_EQ(Half(-0.0f), 0x8000);
  EXPECT_EQ(Half(1.0f), 0x3c00);
  EXPECT_EQ(Half(-2.0f), 0xc000);
  EXPECT_EQ(Half(0.5f), 0x3800);
  EXPECT_EQ(Half(65504.0f), 0x7bff);
  EXPECT_EQ(Half(65519.0f), 0x7bff);  // rounds down to max
  EXPECT_EQ(Half(65520.0f), 0x7bff);  // would round to inf: saturates
  EXPECT_EQ(Half(70000.0f), 0x7bff);
  EXPECT_EQ(Half(-70000.0f), 0xfbff);
  EXPECT_EQ(Half(1e30f), 0x7bff);
  EXPECT_EQ(Half(std::numeric_limits<float>::infinity()), 0x7bff);
  EXPECT_EQ(Half(-std::numeric_limits<float>::infinity()), 0xfbff);
  EXPECT_EQ(Half(0x1p-14f), 0x0400);                    // smallest normal
  EXPECT_EQ(Half(0x1p-24f), 0x0001);                    // smallest subnormal
  EXPECT_EQ(Half(0x1p-25f), 0x0000);                    // tie between 0 and 2^-24: even (0)
  EXPECT_EQ(Half(0x1.8p-25f), 0x0001);                  // above the tie
  EXPECT_EQ(Half(0x1.8p-24f), 0x0002);                  // tie between 1 and 2 ulps: even (2)
  EXPECT_EQ(Half(1.0f + 0x1p-11f), 0x3c00);             // tie: even (1.0)
  EXPECT_EQ(Half(1.0f + 0x3p-11f), 0x3c02);             // tie: even (1 + 2^-9)
  EXPECT_EQ(Half(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(Half(1e-10f), 0x0000);
  EXPECT_EQ(Half(-1e-10f), 0x8000);
  const uint16_t nan = Half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(FromHalf(nan)));
  EXPECT_EQ(FromHalf(0x7bff), 65504.0f);
  EXPECT_EQ(FromHalf(0x0001), 0x1p-24f);
  EXPECT_EQ(FromHalf(0x83ff), -0x3ffp-24f);
  EXPECT_EQ(FromHalf(0x7c00), std::numeric_limits<float>::infinity());
}

// Every fp16 code decodes to a float that encodes back to the same code (NaNs stay NaN; infinity
// saturates).
TEST(WireCodecTest, Fp16AllCodesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = FromHalf(static_cast<uint16_t>(h));
    const uint32_t em = h & 0x7fff;
    if (em > 0x7c00) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_GT(Half(f) & 0x7fff, 0x7c00) << h;
    } else if (em == 0x7c00) {
      EXPECT_TRUE(std::isinf(f)) << h;
      EXPECT_EQ(Half(f), (h & 0x8000) | 0x7bff) << h;
    } else {
      ASSERT_EQ(Half(f), h) << h;
    }
  }
}

// Against an independent reference: nearest of all finite fp16 values, ties to the even code.
TEST(WireCodecTest, Fp16MatchesNearestEvenReference) {
  std::vector<double> pos(0x7c00);  // all non-negative finite fp16 values, increasing with code
  for (uint32_t h = 0; h < 0x7c00; ++h) pos[h] = FromHalf(static_cast<uint16_t>(h));
  auto reference = [&](float x) -> uint16_t {
    const double a = std::fabs(static_cast<double>(x));
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (a >= 65504.0) return sign | 0x7bff;
    const size_t hi = std::lower_bound(pos.begin(), pos.end(), a) - pos.begin();
    if (pos[hi] == a) return sign | static_cast<uint16_t>(hi);
    const size_t lo = hi - 1;
    const double dlo = a - pos[lo], dhi = pos[hi] - a;
    size_t pick = dlo < dhi ? lo : (dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi));
    return sign | static_cast<uint16_t>(pick);
  };
  std::mt19937 rng(7);
  size_t checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns with exponents concentrated around the fp16 range.
    uint32_t u = rng();
    const uint32_t exp = 127 - 30 + (rng() % 50);  // 2^-30 .. 2^19
    if (i % 4 != 0) u = (u & 0x807fffffu) | (exp << 23);
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    ASSERT_EQ(Half(x), reference(x)) << std::hexfloat << x;
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
}

TEST(WireCodecTest, Bf16KnownValues) {
  EXPECT_EQ(Bf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16(-2.0f), 0xc000);
  EXPECT_EQ(Bf16(1.0f + 0x1p-8f), 0x3f80);             // tie: even (1.0)
  EXPECT_EQ(Bf16(1.0f + 0x3p-8f), 0x3f82);             // tie: even (1 + 2^-6)
  EXPECT_EQ(Bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(Bf16(1.0f + 0x1p-7f), 0x3f81);             // exact
  EXPECT_EQ(Bf16(0.0f), 0x0000);
  EXPECT_EQ(Bf16(-0.0f), 0x8000);
  EXPECT_EQ(Bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  const uint16_t nan = Bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A signalling NaN whose payload lies only in the dropped bits must not become inf.
  const uint16_t snan = Bf16(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(snan & 0x7f80, 0x7f80);
  EXPECT_NE(snan & 0x007f, 0);
}

TEST(WireCodecTest, Bf16MatchesNearestEvenReference) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng();
    const float x = std::bit_cast<float>(u);
    if (std::isnan(x)) continue;
    const uint32_t lo_bits = u & 0xffff0000u;
    const double lo = std::bit_cast<float>(lo_bits);
    const double hi_f = std::bit_cast<float>(lo_bits + 0x10000u);  // next bf16 away from zero
    const double a = x;
    uint16_t expect;
    if (std::isinf(x) || lo == a) {
      expect = static_cast<uint16_t>(lo_bits >> 16);
    } else {
      // The candidate beyond FLT_MAX is inf; measure it as 2^128 (where rounding would land).
      const double hi = std::isinf(hi_f) ? std::copysign(0x1p128, a) : hi_f;
      const double dlo = std::fabs(a - lo), dhi = std::fabs(hi - a);
      const bool up = dhi < dlo || (dhi == dlo && ((lo_bits >> 16) & 1));
      expect = static_cast<uint16_t>((up ? lo_bits + 0x10000u : lo_bits) >> 16);
    }
    ASSERT_EQ(Bf16(x), expect) << std::hexfloat << x;
  }
}

TEST(WireCodecTest, RoundTripErrorBounds) {
  // fp16: normal range, subnormal range and saturation.
  {
    std::vector<float> x = MixedData(10000, 2, 65504.0, 1e-9);
    x.push_back(65504.0f);
    x.push_back(-1e6f);
    x.push_back(0x1p-14f);
    std::vector<float> d = DecodeVec(WireCodec::kFp16, EncodeVec(WireCodec::kFp16, x), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double a = std::fabs(x[i]);
      const double err = std::fabs(static_cast<double>(d[i]) - x[i]);
      if (a > 65504.0) {
        EXPECT_EQ(d[i], std::copysign(65504.0f, x[i]));
      } else if (a >= 0x1p-14) {
        EXPECT_LE(err, a * 0x1p-11) << x[i];
      } else {
        EXPECT_LE(err, 0x1p-25) << x[i];  // half a subnormal step
      }
      EXPECT_EQ(std::signbit(d[i]) || d[i] == 0, std::signbit(x[i]) || d[i] == 0);
    }
  }
  // bf16: whole fp32 normal range.
  {
    std::vector<float> x = MixedData(10000, 3, 1e37, 1e-37);
    std::vector<float> d = DecodeVec(WireCodec::kBf16, EncodeVec(WireCodec::kBf16, x), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_LE(std::fabs(static_cast<double>(d[i]) - x[i]), std::fabs(x[i]) * 0x1p-8) << x[i];
    }
  }
  // int8: per element within half a step of its block's scale.
  for (uint64_t seed : {4, 5}) {
    std::vector<float> x = MixedData(1000, seed, seed == 4 ? 1e3 : 1e30, 1e-6);
    std::fill(x.begin() + 512, x.begin() + 768, 0.0f);  // an all-zero block
    std::vector<uint8_t> enc = EncodeVec(WireCodec::kInt8, x);
    std::vector<float> d = DecodeVec(WireCodec::kInt8, enc, x.size());
    for (size_t b = 0; b * kInt8BlockSize < x.size(); ++b) {
      float scale;
      std::memcpy(&scale, enc.data() + 4 * b, 4);
      const size_t begin = b * kInt8BlockSize, end = std::min(x.size(), begin + kInt8BlockSize);
      float amax = 0;
      for (size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
      EXPECT_EQ(scale, amax / 127.0f);
      for (size_t i = begin; i < end; ++i) {
        EXPECT_LE(std::fabs(static_cast<double>(d[i]) - x[i]), scale * 0.5 * (1 + 1e-6))
            << i << " " << x[i];
      }
    }
    for (size_t i = 512; i < 768; ++i) EXPECT_EQ(d[i], 0.0f);
  }
}

TEST(WireCodecTest, Int8LayoutAndRounding) {
  // Block 0: max 127 -> scale exactly 1; block 1 (44 elements): max 254 -> scale 2.
  std::vector<float> x(300, 0.0f);
  const float head[] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, 0.0f, -127.0f, 126.6f};
  std::copy(std::begin(head), std::end(head), x.begin());
  x[256] = -254.0f;
  x[257] = 3.0f;   // 1.5 steps: half away from zero -> code 2
  x[258] = -1.0f;  // -0.5 steps -> code -1
  std::vector<uint8_t> enc = EncodeVec(WireCodec::kInt8, x);
  ASSERT_EQ(enc.size(), 8u + 300u);
  const uint8_t scale1[4] = {0x00, 0x00, 0x80, 0x3f};  // 1.0f little-endian
  const uint8_t scale2[4] = {0x00, 0x00, 0x00, 0x40};  // 2.0f
  EXPECT_EQ(std::memcmp(enc.data(), scale1, 4), 0);
  EXPECT_EQ(std::memcmp(enc.data() + 4, scale2, 4), 0);
  const int8_t* codes = reinterpret_cast<const int8_t*>(enc.data() + 8);
  const int8_t expect_head[] = {127, 3, -3, 1, -1, 1, 0, -127, 127};
  for (size_t i = 0; i < std::size(expect_head); ++i) EXPECT_EQ(codes[i], expect_head[i]) << i;
  EXPECT_EQ(codes[256], -127);
  EXPECT_EQ(codes[257], 2);
  EXPECT_EQ(codes[258], -1);
  std::vector<float> d = DecodeVec(WireCodec::kInt8, enc, x.size());
  EXPECT_EQ(d[1], 3.0f);
  EXPECT_EQ(d[256], -254.0f);
  EXPECT_EQ(d[257], 4.0f);

  // All-zero input: scales 0, codes 0.
  std::vector<float> zeros(10, 0.0f);
  std::vector<uint8_t> zenc = EncodeVec(WireCodec::kInt8, zeros);
  EXPECT_TRUE(std::all_of(zenc.begin(), zenc.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(DecodeVec(WireCodec::kInt8, zenc, 10), zeros);

  // A NaN poisons only its own block.
  std::vector<float> bad(300, 1.0f);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dbad = DecodeVec(WireCodec::kInt8, EncodeVec(WireCodec::kInt8, bad), 300);
  EXPECT_TRUE(std::isnan(dbad[0]));
  EXPECT_EQ(dbad[299], 1.0f);
}

TEST(WireCodecTest, DecodeAddAccumulates) {
  std::vector<float> x = MixedData(700, 6, 100.0, 1e-3);
  for (WireCodec c : kAllCodecs) {
    std::vector<uint8_t> enc = EncodeVec(c, x);
    std::vector<float> d = DecodeVec(c, enc, x.size());
    std::vector<float> acc(x.size());
    for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(i) * 0.25f;
    std::vector<float> expect = acc;
    for (size_t i = 0; i < acc.size(); ++i) expect[i] += d[i];
    DecodeAdd(c, enc.data(), x.size(), acc.data());
    EXPECT_EQ(acc, expect) << WireCodecName(c);
  }
}

// One quantisation step (the spacing of representable values) at y ~ x, per codec.
double StepBound(WireCodec c, const std::vector<float>& x, size_t i) {
  const double a = std::fabs(x[i]);
  switch (c) {
    case WireCodec::kNone:
      return 0;
    case WireCodec::kFp16:
      return std::max(a, 0x1p-14) * 0x1p-10 * (1 + 0x1p-10);
    case WireCodec::kBf16:
      return a * 0x1p-7 * (1 + 0x1p-7);
    case WireCodec::kInt8: {
      const size_t b = i / kInt8BlockSize;
      double amax = 0;
      for (size_t k = b * kInt8BlockSize; k < std::min(x.size(), (b + 1) * kInt8BlockSize); ++k) {
        amax = std::max(amax, std::fabs(static_cast<double>(x[k])));
      }
      return amax / 127.0 * 1.02;  // |y| <= |x| + half a step
    }
  }
  return 0;
}

TEST(WireCodecTest, ErrorFeedbackDoesNotDrift) {
  constexpr int kSteps = 100;
  const std::vector<float> x = MixedData(600, 8, 1000.0, 1e-6);
  for (WireCodec c : kAllCodecs) {
    SCOPED_TRACE(WireCodecName(c));
    std::vector<float> residual(x.size(), 0.0f);
    std::vector<double> sum(x.size(), 0.0), sum_plain(x.size(), 0.0);
    std::vector<uint8_t> enc(EncodedBytes(c, x.size()));
    std::vector<float> d(x.size());
    const std::vector<float> plain = DecodeVec(c, EncodeVec(c, x), x.size());
    for (int k = 0; k < kSteps; ++k) {
      Encode(c, x.data(), x.size(), residual.data(), enc.data());
      Decode(c, enc.data(), x.size(), d.data());
      for (size_t i = 0; i < x.size(); ++i) {
        sum[i] += d[i];
        sum_plain[i] += plain[i];
        // The residual stays within half a step: no accumulation.
        ASSERT_LE(std::fabs(residual[i]), 0.5 * StepBound(c, x, i) + 1e-30) << i << " " << k;
      }
    }
    size_t plain_drifted = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double target = static_cast<double>(kSteps) * x[i];
      // fp32 rounding of y = x + e each step (|y| <= |x| + half a step).
      const double slop = kSteps * 0x1p-23 * (std::fabs(x[i]) + StepBound(c, x, i)) + 1e-30;
      EXPECT_LE(std::fabs(sum[i] - target), StepBound(c, x, i) + slop) << i << " " << x[i];
      // Conservation: everything not yet delivered is in the residual.
      EXPECT_LE(std::fabs(sum[i] + residual[i] - target), slop) << i << " " << x[i];
      if (std::fabs(sum_plain[i] - target) > StepBound(c, x, i) + slop) ++plain_drifted;
    }
    // Without feedback the same bound fails for many elements (the test can tell them apart).
    // (int8: elements far below their block's scale round to 0 and stay within the bound.)
    if (c != WireCodec::kNone) {
      EXPECT_GT(plain_drifted, x.size() / 4);
    }
  }
}

TEST(WireCodecTest, NonFiniteResidualIsReset) {
  for (WireCodec c : {WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity()};
    std::vector<float> residual(3, 0.0f);
    EncodeVec(c, x, residual.data());
    for (float r : residual) EXPECT_TRUE(std::isfinite(r)) << WireCodecName(c);
  }
}

// ---------------------------------------------------------------------------------------------
// PowerSGD

}  // namespace
}  // namespace ringmaster::trainer
