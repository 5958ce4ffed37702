// Tests for the gradient-compression codecs (fp16/bf16/int8 with error feedback) and PowerSGD,
// the latter simulating several ranks in one process with a summing fake collective.
#include "trainer/dist/compression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
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

// Sums W ranks' buffers (in rank order, so results are reproducible) and hands every rank the
// same bits. Each rank calls from its own thread; generation counting separates rounds.
class FakeCollective {
 public:
  explicit FakeCollective(int world) : world_(world), ptrs_(world), sizes_(world), sent_(world) {}

  absl::Status AllReduceSum(int rank, float* data, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    ptrs_[rank] = data;
    sizes_[rank] = n;
    sent_[rank] += n;
    const uint64_t gen = generation_;
    if (++arrived_ == world_) {
      ok_ = std::all_of(sizes_.begin(), sizes_.end(), [n](size_t s) { return s == n; });
      if (ok_) {
        sum_.assign(n, 0.0f);
        for (int r = 0; r < world_; ++r) {
          for (size_t i = 0; i < n; ++i) sum_[i] += ptrs_[r][i];
        }
        for (int r = 0; r < world_; ++r) std::memcpy(ptrs_[r], sum_.data(), n * sizeof(float));
      }
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != gen; })) {
      return absl::DeadlineExceededError("fake collective: peers did not arrive");
    }
    return ok_ ? absl::OkStatus() : absl::InternalError("fake collective: size mismatch");
  }

  size_t sent(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_[rank];
  }

 private:
  const int world_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool ok_ = true;
  std::vector<float*> ptrs_;
  std::vector<size_t> sizes_;
  std::vector<size_t> sent_;
  std::vector<float> sum_;
};

// W PowerSgd instances, one per simulated rank.
class Sim {
 public:
  Sim(int world, const std::vector<MatrixRange>& matrices, size_t total, PowerSgdOptions options)
      : world_(world), coll_(world) {
    for (int r = 0; r < world; ++r) {
      ranks_.push_back(std::make_unique<PowerSgd>(matrices, total, options));
    }
  }

  // One AllReduce on every rank (concurrently); bufs[r] is rank r's gradient in, result out.
  // Checks success and that every rank ends with bit-identical output.
  void Step(std::vector<std::vector<float>>& bufs) {
    std::vector<absl::Status> status(world_);
    std::vector<std::thread> threads;
    for (int r = 0; r < world_; ++r) {
      threads.emplace_back([&, r] {
        status[r] = ranks_[r]->AllReduce(bufs[r].data(), world_, [this, r](float* d, size_t n) {
          return coll_.AllReduceSum(r, d, n);
        });
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < world_; ++r) ASSERT_TRUE(status[r].ok()) << status[r];
    for (int r = 1; r < world_; ++r) {
      ASSERT_EQ(std::memcmp(bufs[r].data(), bufs[0].data(), bufs[0].size() * sizeof(float)), 0)
          << "rank " << r << " differs from rank 0";
    }
  }

  PowerSgd& rank(int r) { return *ranks_[r]; }
  FakeCollective& coll() { return coll_; }

 private:
  int world_;
  FakeCollective coll_;
  std::vector<std::unique_ptr<PowerSgd>> ranks_;
};

std::vector<float> RandomVec(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<double> SumOver(const std::vector<std::vector<float>>& per_rank) {
  std::vector<double> s(per_rank[0].size(), 0.0);
  for (const auto& v : per_rank) {
    for (size_t i = 0; i < v.size(); ++i) s[i] += v[i];
  }
  return s;
}

// ||a - b||_F / ||b||_F over one matrix region.
double RelErr(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

double MaxAbs(const double* b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(b[i]));
  return m;
}

TEST(PowerSgdTest, ExactWhenRankCoversTheMatrix) {
  // 6x10 (min 6) and 12x5 (min 5) with rank 6: both exact. Rate 0: nothing is skipped.
  const std::vector<MatrixRange> mats = {{0, 6, 10}, {70, 12, 5}};
  const size_t total = 130;
  PowerSgdOptions opt;
  opt.rank = 6;
  opt.min_compression_rate = 0;
  constexpr int kWorld = 3;
  Sim sim(kWorld, mats, total, opt);
  EXPECT_EQ(sim.rank(0).compressed_matrices(), 2u);
  // The 12x5 matrix uses rank min(6, 12, 5) = 5.
  EXPECT_EQ(sim.rank(0).wire_floats_per_call(), (6 + 10) * 6u + (12 + 5) * 5u + 10u);
  std::mt19937_64 rng(21);
  for (int call = 0; call < 4; ++call) {
    std::vector<std::vector<float>> bufs;
    for (int r = 0; r < kWorld; ++r) bufs.push_back(RandomVec(total, rng));
    const std::vector<double> expect = SumOver(bufs);
    sim.Step(bufs);
    for (const MatrixRange& m : mats) {
      const size_t n = m.rows * m.cols;
      const double tol = 1e-4 * MaxAbs(&expect[m.offset], n);
      for (size_t i = m.offset; i < m.offset + n; ++i) {
        EXPECT_NEAR(bufs[0][i], expect[i], tol) << "call " << call << " element " << i;
      }
    }
  }
}

TEST(PowerSgdTest, WorldOfOneWithFullRankIsIdentity) {
  PowerSgdOptions opt;
  opt.rank = 8;
  opt.min_compression_rate = 0;
  PowerSgd p({{0, 8, 9}}, 72, opt);
  std::mt19937_64 rng(3);
  std::vector<float> g = RandomVec(72, rng);
  const std::vector<float> orig = g;
  ASSERT_TRUE(p.AllReduce(g.data(), 1, [](float*, size_t) { return absl::OkStatus(); }).ok());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], orig[i], 1e-4 * 4) << i;
}

TEST(PowerSgdTest, RankOneSumRecoveredAtRankOne) {
  // Per-rank gradients are full rank, but their sum u v^T has rank 1.
  constexpr size_t kRows = 16, kCols = 12;
  constexpr int kWorld = 2;
  std::mt19937_64 rng(5);
  const std::vector<float> u = RandomVec(kRows, rng), v = RandomVec(kCols, rng);
  const std::vector<float> a = RandomVec(kRows * kCols, rng);
  std::vector<double> sum(kRows * kCols);
  std::vector<std::vector<float>> g(kWorld, std::vector<float>(kRows * kCols));
  for (size_t i = 0; i < kRows; ++i) {
    for (size_t j = 0; j < kCols; ++j) {
      const float uv = u[i] * v[j];
      g[0][i * kCols + j] = a[i * kCols + j] + uv;
      g[1][i * kCols + j] = -a[i * kCols + j];
      sum[i * kCols + j] = static_cast<double>(g[0][i * kCols + j]) + g[1][i * kCols + j];
    }
  }
  PowerSgdOptions opt;
  opt.rank = 1;
  opt.seed = 99;
  Sim sim(kWorld, {{0, kRows, kCols}}, kRows * kCols, opt);
  ASSERT_EQ(sim.rank(0).compressed_matrices(), 1u);
  for (int call = 0; call < 2; ++call) {  // the second call runs from the warm-start Q
    std::vector<std::vector<float>> bufs = g;
    sim.Step(bufs);
    EXPECT_LT(RelErr(bufs[0].data(), sum.data(), sum.size()), 1e-5) << "call " << call;
  }
  // Control: a rank-2 sum is not recovered at rank 1.
  std::vector<std::vector<float>> bufs = g;
  for (size_t i = 0; i < kRows; ++i) bufs[1][i * kCols + (i % kCols)] += 3.0f;
  std::vector<double> sum2 = SumOver(bufs);
  Sim sim2(kWorld, {{0, kRows, kCols}}, kRows * kCols, opt);
  sim2.Step(bufs);
  EXPECT_GT(RelErr(bufs[0].data(), sum2.data(), sum2.size()), 0.05);
}

TEST(PowerSgdTest, ErrorFeedbackAverageConverges) {
  constexpr size_t kRows = 32, kCols = 24;
  constexpr int kWorld = 4, kCalls = 200;
  std::mt19937_64 rng(8);
  std::vector<std::vector<float>> g;
  for (int r = 0; r < kWorld; ++r) g.push_back(RandomVec(kRows * kCols, rng));
  const std::vector<double> sum = SumOver(g);
  PowerSgdOptions opt;
  opt.rank = 4;
  opt.seed = 1;
  Sim sim(kWorld, {{0, kRows, kCols}}, kRows * kCols, opt);
  std::vector<double> total(kRows * kCols, 0.0);  // sum of outputs so far
  auto mean_err = [&](int calls) {
    std::vector<float> mean(total.size());
    for (size_t i = 0; i < total.size(); ++i) mean[i] = static_cast<float>(total[i] / calls);
    return RelErr(mean.data(), sum.data(), sum.size());
  };
  double first_err = 0, err_at_50 = 0;
  for (int call = 0; call < kCalls; ++call) {
    std::vector<std::vector<float>> bufs = g;
    sim.Step(bufs);
    for (size_t i = 0; i < total.size(); ++i) total[i] += bufs[0][i];
    if (call == 0) first_err = mean_err(1);
    if (call == 49) err_at_50 = mean_err(50);
  }
  const double err_at_end = mean_err(kCalls);
  EXPECT_GT(first_err, 0.5);    // one call alone is a poor approximation (rank 4 of 24)...
  EXPECT_LT(err_at_end, 0.05);  // ...but error feedback delivers the rest over time
  EXPECT_LT(err_at_end, 0.5 * err_at_50);  // and keeps shrinking (no drift)
  // Conservation: sum of outputs + sum of residuals == calls * sum of gradients.
  std::vector<double> delivered = total;
  for (int r = 0; r < kWorld; ++r) {
    const std::vector<float> s = sim.rank(r).State();
    for (size_t i = 0; i < total.size(); ++i) delivered[i] += s[i];
  }
  for (size_t i = 0; i < total.size(); ++i) {
    EXPECT_NEAR(delivered[i], kCalls * sum[i], 1e-2 * kCalls) << i;
  }
}

TEST(PowerSgdTest, UncompressedExactAndWireCount) {
  // A: 20x16 compressed (rank 3); B: 4x4 skipped (16 < 2*8*3); C: 30x8 compressed
  // (240 >= 2*38*3); D: empty. Everything else, B included, is sent exactly.
  const std::vector<MatrixRange> mats = {{10, 20, 16}, {400, 4, 4}, {500, 30, 8}, {900, 0, 5}};
  const size_t total = 1000;
  PowerSgdOptions opt;
  opt.rank = 3;
  constexpr int kWorld = 3;
  Sim sim(kWorld, mats, total, opt);
  EXPECT_EQ(sim.rank(0).compressed_matrices(), 2u);
  EXPECT_EQ(sim.rank(0).raw_floats(), total);
  const size_t unc = total - 320 - 240;
  const size_t wire = unc + (20 + 16) * 3 + (30 + 8) * 3;
  EXPECT_EQ(sim.rank(0).wire_floats_per_call(), wire);
  std::mt19937_64 rng(13);
  for (int call = 0; call < 3; ++call) {
    std::vector<std::vector<float>> bufs;
    for (int r = 0; r < kWorld; ++r) bufs.push_back(RandomVec(total, rng));
    std::vector<float> exact(total, 0.0f);  // same rank-order float sum as the collective
    for (int r = 0; r < kWorld; ++r) {
      for (size_t i = 0; i < total; ++i) exact[i] += bufs[r][i];
    }
    sim.Step(bufs);
    for (size_t i = 0; i < total; ++i) {
      const bool in_a = i >= 10 && i < 330, in_c = i >= 500 && i < 740;
      if (!in_a && !in_c) {
        ASSERT_EQ(bufs[0][i], exact[i]) << i;
      }
    }
  }
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(sim.coll().sent(r), 3 * wire);
}

TEST(PowerSgdTest, SkipRule) {
  PowerSgdOptions opt;
  opt.rank = 2;
  opt.min_compression_rate = 2;
  // 8x8: 64 vs 2*16*2 = 64: compressed (skip only when strictly smaller).
  EXPECT_EQ(PowerSgd({{0, 8, 8}}, 64, opt).compressed_matrices(), 1u);
  // 7x8: 56 < 2*15*2 = 60: skipped, sent exactly.
  PowerSgd small({{0, 7, 8}}, 56, opt);
  EXPECT_EQ(small.compressed_matrices(), 0u);
  EXPECT_EQ(small.wire_floats_per_call(), 56u);
  EXPECT_TRUE(small.State().empty());
  opt.min_compression_rate = 0;
  EXPECT_EQ(PowerSgd({{0, 7, 8}}, 56, opt).compressed_matrices(), 1u);
}

TEST(PowerSgdTest, InitialQDependsOnSeedAndIndexOnly) {
  PowerSgdOptions opt;
  opt.rank = 2;
  opt.seed = 5;
  const std::vector<MatrixRange> mats = {{0, 10, 10}, {100, 10, 10}};
  const std::vector<float> s1 = PowerSgd(mats, 200, opt).State();
  const std::vector<float> s2 = PowerSgd(mats, 200, opt).State();
  ASSERT_EQ(s1.size(), 2u * (100 + 20));
  EXPECT_EQ(s1, s2);
  // Layout: residual (zero) then Q, per matrix; two matrices get different Q.
  EXPECT_TRUE(std::all_of(s1.begin(), s1.begin() + 100, [](float x) { return x == 0; }));
  const std::vector<float> q0(s1.begin() + 100, s1.begin() + 120);
  const std::vector<float> q1(s1.begin() + 220, s1.begin() + 240);
  EXPECT_NE(q0, q1);
  EXPECT_TRUE(std::any_of(q0.begin(), q0.end(), [](float x) { return x != 0; }));
  opt.seed = 6;
  EXPECT_NE(PowerSgd(mats, 200, opt).State(), s1);
}

TEST(PowerSgdTest, StateRoundTrip) {
  const std::vector<MatrixRange> mats = {{0, 12, 10}, {130, 9, 14}};
  const size_t total = 300;
  PowerSgdOptions opt;
  opt.rank = 2;
  constexpr int kWorld = 2;
  Sim a(kWorld, mats, total, opt);
  std::mt19937_64 rng(17);
  for (int call = 0; call < 3; ++call) {
    std::vector<std::vector<float>> bufs;
    for (int r = 0; r < kWorld; ++r) bufs.push_back(RandomVec(total, rng));
    a.Step(bufs);
  }
  Sim b(kWorld, mats, total, opt);
  for (int r = 0; r < kWorld; ++r) {
    const std::vector<float> s = a.rank(r).State();
    EXPECT_EQ(s.size(), 120u + 20u + 126u + 28u);
    ASSERT_TRUE(b.rank(r).SetState(s).ok());
    EXPECT_EQ(b.rank(r).State(), s);
  }
  std::vector<std::vector<float>> bufs_a;
  for (int r = 0; r < kWorld; ++r) bufs_a.push_back(RandomVec(total, rng));
  std::vector<std::vector<float>> bufs_b = bufs_a;
  a.Step(bufs_a);
  b.Step(bufs_b);
  EXPECT_EQ(bufs_a, bufs_b);
  EXPECT_EQ(b.rank(0).SetState(std::vector<float>(5)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PowerSgdTest, InvalidConfigurations) {
  auto noop = [](float*, size_t) { return absl::OkStatus(); };
  std::vector<float> g(100, 1.0f);
  PowerSgdOptions opt;
  opt.min_compression_rate = 0;
  PowerSgd overlap({{0, 5, 5}, {20, 5, 5}}, 100, opt);
  EXPECT_EQ(overlap.AllReduce(g.data(), 1, noop).code(), absl::StatusCode::kInvalidArgument);
  PowerSgd outside({{90, 5, 5}}, 100, opt);
  EXPECT_EQ(outside.AllReduce(g.data(), 1, noop).code(), absl::StatusCode::kInvalidArgument);
  PowerSgdOptions bad_rank = opt;
  bad_rank.rank = 0;
  PowerSgd zero_rank({{0, 5, 5}}, 100, bad_rank);
  EXPECT_EQ(zero_rank.AllReduce(g.data(), 1, noop).code(), absl::StatusCode::kInvalidArgument);
  PowerSgd fine({{0, 5, 5}, {25, 5, 5}}, 100, opt);
  EXPECT_TRUE(fine.init_status().ok());
  EXPECT_EQ(fine.AllReduce(g.data(), 0, noop).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fine.AllReduce(g.data(), 1, noop).ok());
}

TEST(PowerSgdTest, FailedCollectiveChangesNothing) {
  PowerSgdOptions opt;
  opt.rank = 2;
  PowerSgd p({{4, 10, 12}}, 130, opt);
  std::mt19937_64 rng(23);
  std::vector<float> g = RandomVec(130, rng);
  auto identity = [](float*, size_t) { return absl::OkStatus(); };
  ASSERT_TRUE(p.AllReduce(g.data(), 1, identity).ok());  // non-trivial residual and Q
  for (int fail_at = 0; fail_at < 3; ++fail_at) {
    std::vector<float> grads = RandomVec(130, rng);
    const std::vector<float> grads_before = grads;
    const std::vector<float> state_before = p.State();
    int calls = 0;
    absl::Status st = p.AllReduce(grads.data(), 1, [&](float* d, size_t n) {
      if (calls++ == fail_at) {
        std::fill(d, d + n, -1.0f);  // a failing collective may leave garbage behind
        return absl::UnavailableError("peer lost");
      }
      return absl::OkStatus();
    });
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << fail_at;
    EXPECT_EQ(grads, grads_before) << fail_at;
    EXPECT_EQ(p.State(), state_before) << fail_at;
  }
}

TEST(PowerSgdTest, ZeroAndNonFiniteGradientsRecover) {
  constexpr size_t kRows = 10, kCols = 12, kN = kRows * kCols;
  constexpr int kWorld = 2;
  PowerSgdOptions opt;
  opt.rank = 10;  // full rank: exact, so recovery is easy to check
  opt.min_compression_rate = 0;
  Sim sim(kWorld, {{0, kRows, kCols}}, kN, opt);
  auto all_finite = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  // All-zero gradients: degenerate P, zero output, no NaN.
  std::vector<std::vector<float>> zeros(kWorld, std::vector<float>(kN, 0.0f));
  sim.Step(zeros);
  for (float x : zeros[0]) EXPECT_EQ(x, 0.0f);
  // A NaN on one rank: visible in this call's output...
  std::mt19937_64 rng(29);
  std::vector<std::vector<float>> bad = {RandomVec(kN, rng), RandomVec(kN, rng)};
  bad[1][7] = std::numeric_limits<float>::quiet_NaN();
  sim.Step(bad);
  EXPECT_FALSE(all_finite(bad[0]));
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(all_finite(sim.rank(r).State()));
  // ...but the following calls are finite and exact again.
  for (int call = 0; call < 2; ++call) {
    std::vector<std::vector<float>> good = {RandomVec(kN, rng), RandomVec(kN, rng)};
    const std::vector<double> expect = SumOver(good);
    sim.Step(good);
    ASSERT_TRUE(all_finite(good[0]));
    EXPECT_LT(RelErr(good[0].data(), expect.data(), kN), 1e-4);
  }
}

}  // namespace
}  // namespace ringmaster::trainer
