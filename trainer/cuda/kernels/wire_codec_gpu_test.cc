// ctest-labels: gpu
// The device wire codecs (wire_codec_gpu.h) against the CPU codec (trainer/parallel/wire_codec.h),
// the reference: the same encoded bytes, residuals and decoded floats bit for bit, on random
// data of several sizes (n < 256, n not a multiple of 256), the edge values of each format,
// sweeps over the float bit patterns, every fp16 code, and the zero-chunk mask. Skips (exit 77)
// where no CUDA device exists.
// Bit for bit on a real GPU too (gpu_test_tolerance.h): the kernels round with __fmul_rn /
// __fadd_rn and explicit conversions, which nvcc never contracts or reorders, and the emulator
// builds them with -ffp-contract=off to match; no math library call is involved.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/kernels/wire_codec.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer {
namespace {

constexpr WireCodec kCodecs[] = {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16,
                                 WireCodec::kInt8};

float Bits(uint32_t u) { return std::bit_cast<float>(u); }

// Bit patterns, so that NaN payloads and -0 compare as what they are.
std::vector<uint32_t> AsBits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

std::string Hex(uint32_t bits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", bits);
  return buf;
}

// Bit-for-bit equality, naming the first difference.
::testing::AssertionResult SameFloatBits(const std::vector<float>& want,
                                         const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "sizes " << want.size() << " vs " << got.size();
  }
  const std::vector<uint32_t> x = AsBits(want), y = AsBits(got);
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i]) {
      return ::testing::AssertionFailure()
             << "first difference at " << i << " of " << x.size() << ": want " << Hex(x[i]) << " ("
             << want[i] << "), got " << Hex(y[i]) << " (" << got[i] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& want,
                                     const std::vector<uint8_t>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "sizes " << want.size() << " vs " << got.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) {
      return ::testing::AssertionFailure() << "first differing byte " << i << " of " << want.size()
                                           << ": want " << int{want[i]} << ", got " << int{got[i]};
    }
  }
  return ::testing::AssertionSuccess();
}

// One codec applied on both sides to the same input: encoded bytes, the updated residual (when
// given), Decode of the bytes and DecodeAdd onto `acc`, compared bit for bit.
void ExpectDeviceMatchesCpu(WireCodec c, const std::vector<float>& x,
                            const std::vector<float>* residual, const std::vector<float>& acc) {
  SCOPED_TRACE(::testing::Message() << WireCodecName(c) << " n=" << x.size()
                                    << (residual != nullptr ? " with residual" : ""));
  const size_t n = x.size();
  const size_t bytes = EncodedBytes(c, n);

  std::vector<uint8_t> cpu_bytes(bytes);
  std::vector<float> cpu_res = residual != nullptr ? *residual : std::vector<float>();
  Encode(c, x.data(), n, residual != nullptr ? cpu_res.data() : nullptr, cpu_bytes.data());
  std::vector<float> cpu_dec(n), cpu_acc = acc;
  Decode(c, cpu_bytes.data(), n, cpu_dec.data());
  DecodeAdd(c, cpu_bytes.data(), n, cpu_acc.data());

  DeviceArray<float> dx(x);
  DeviceArray<float> dres(residual != nullptr ? *residual : std::vector<float>(1));
  DeviceArray<uint8_t> dbytes(bytes + 1);  // poisoned 0xff; the extra byte must stay so
  DeviceArray<float> ddec(n);
  DeviceArray<float> dacc(acc);
  ASSERT_EQ(cuda::WireEncode(c, dx.p, n, residual != nullptr ? dres.p : nullptr, dbytes.p, nullptr),
            cudaSuccess);
  ASSERT_EQ(cuda::WireDecode(c, dbytes.p, n, ddec.p, nullptr), cudaSuccess);
  ASSERT_EQ(cuda::WireDecodeAdd(c, dbytes.p, n, dacc.p, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<uint8_t> got_bytes = dbytes.Download();
  EXPECT_EQ(got_bytes.back(), 0xff) << "wrote past EncodedBytes";
  got_bytes.pop_back();
  EXPECT_TRUE(SameBytes(cpu_bytes, got_bytes));
  if (residual != nullptr) {
    EXPECT_TRUE(SameFloatBits(cpu_res, dres.Download()));
  }
  EXPECT_TRUE(SameFloatBits(cpu_dec, ddec.Download()));
  EXPECT_TRUE(SameFloatBits(cpu_acc, dacc.Download()));
  EXPECT_TRUE(SameFloatBits(x, dx.Download()));  // the input is not touched
}

std::vector<float> Normal(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Sizes below, at and around the 256-element block, and a few blocks with a short last one.
const size_t kSizes[] = {1, 7, 255, 256, 257, 1000, 4099, 70001};

TEST(WireCodecGpu, RandomDataMatchesTheCpuCodec) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  uint32_t seed = 1;
  for (WireCodec c : kCodecs) {
    for (size_t n : kSizes) {
      // Blocks of different magnitudes, so that int8 scales differ from block to block.
      std::vector<float> x = Normal(n, 1.0f, seed++);
      for (size_t i = 0; i < n; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i / 256 % 7) - 3);
      const std::vector<float> residual = Normal(n, 1e-3f, seed++);
      const std::vector<float> acc = Normal(n, 2.0f, seed++);
      ExpectDeviceMatchesCpu(c, x, nullptr, acc);
      ExpectDeviceMatchesCpu(c, x, &residual, acc);
    }
  }
}

// Past 2048 blocks (kMaxGrid in wire_codec.cu) every kernel loops over blocks: the second
// round must see the same bytes as the first.
TEST(WireCodecGpu, GridStrideBeyondTheGridMatchesTheCpuCodec) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 2048 * 256 + 1000;  // blocks 0..3 take a second round
  const std::vector<float> x = Normal(n, 1.0f, 41);
  const std::vector<float> residual = Normal(n, 1e-3f, 42);
  const std::vector<float> acc = Normal(n, 1.0f, 43);
  for (WireCodec c : {WireCodec::kFp16, WireCodec::kInt8}) {
    ExpectDeviceMatchesCpu(c, x, &residual, acc);
  }
}

// Error feedback over successive encodes: the residual the device leaves is the one the CPU
// leaves, step after step.
TEST(WireCodecGpu, ErrorFeedbackCarriesOverAsOnTheCpu) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const size_t n = 1000;
  for (WireCodec c : kCodecs) {
    SCOPED_TRACE(WireCodecName(c));
    std::vector<float> cpu_res(n, 0.0f);
    DeviceArray<float> dres(cpu_res);
    DeviceArray<uint8_t> dbytes(EncodedBytes(c, n));
    std::vector<uint8_t> cpu_bytes(EncodedBytes(c, n));
    for (uint32_t step = 0; step < 4; ++step) {
      const std::vector<float> x = Normal(n, 0.1f, 100 + step);
      Encode(c, x.data(), n, cpu_res.data(), cpu_bytes.data());
      DeviceArray<float> dx(x);
      ASSERT_EQ(cuda::WireEncode(c, dx.p, n, dres.p, dbytes.p, nullptr), cudaSuccess);
      EXPECT_TRUE(SameBytes(cpu_bytes, dbytes.Download()));
      EXPECT_TRUE(SameFloatBits(cpu_res, dres.Download()));
    }
  }
}

// Blocks of 256 built around each format's edges; the residual is given non-zero so that y =
// x + residual crosses the edges too.
std::vector<float> EdgeValues() {
  const float inf = std::numeric_limits<float>::infinity();
  const float kMin = std::numeric_limits<float>::min(), kMax = std::numeric_limits<float>::max();
  std::vector<float> v;
  auto block = [&](std::vector<float> values) {  // one 256-block, the rest filled by repetition
    for (size_t i = 0; i < 256; ++i) v.push_back(values[i % values.size()]);
  };
  // Zeros, subnormals, the smallest normals, fp16's subnormal range and its ties.
  block({0.0f, -0.0f, Bits(1), Bits(0x80000001u), Bits(0x007fffffu), kMin, -kMin, 1e-40f,
         std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), std::ldexp(1.0f, -14),
         std::ldexp(1023.0f, -24), std::ldexp(1.5f, -24), 6e-8f, -3e-5f});
  // fp16's top: 65504, the saturation threshold 65520 and around it, beyond, inf.
  block({65504.0f, 65519.996f, 65520.0f, -65520.0f, 65536.0f, 1e9f, kMax, -kMax, inf, -inf,
         65505.0f, 65535.0f, 2048.5f, 2049.0f, -65504.0f, 1.0f});
  // NaNs with payloads (signalling, quiet, negative, payload only in the low bits).
  block({Bits(0x7fc00000u), Bits(0xffc00000u), Bits(0x7f800001u), Bits(0x7fa00000u),
         Bits(0xff800100u), Bits(0x7f80e000u), 1.0f, -2.0f});
  // bf16 ties: low 16 bits exactly 0x8000 with even and odd kept parts, and near FLT_MAX.
  block({Bits(0x3f808000u), Bits(0x3f818000u), Bits(0xbf808000u), Bits(0x3f807fffu),
         Bits(0x3f808001u), Bits(0x7f7f8000u), Bits(0x7f7f7fffu), Bits(0xff7f8000u)});
  // int8: a block whose max is 127, with exact halves (round half away from zero) and values
  // that clamp.
  block({127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 126.5f, -126.5f, 0.49999997f, 3.0f, -127.0f,
         0.0f});
  block({0.0f});                                       // all zero
  block({0.0f, -0.0f});                                // all ±0
  block({Bits(1), -1e-40f, 0.0f, Bits(0x007fffffu)});  // all subnormal: int8 scale 0
  block({1.0f, 2.0f, inf, 3.0f});                      // an inf: NaN scale
  block({1.0f, Bits(0x7fc00001u), -1.0f});             // a NaN: NaN scale
  block({kMax, -kMax, 1.0f, 1e30f});                   // finite, max |y| = FLT_MAX
  block({kMin, -kMin, 1e-39f, 0.0f});                  // max |y| exactly 2^-126: scale subnormal
  for (int i = 0; i < 77; ++i) v.push_back(static_cast<float>(i) * 0.37f - 11.0f);  // short tail
  return v;
}

TEST(WireCodecGpu, EdgeValuesMatchTheCpuCodec) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const std::vector<float> x = EdgeValues();
  const std::vector<float> zero(x.size(), 0.0f);
  // Residuals that move some values across the edges, and one that is itself extreme.
  std::vector<float> residual = Normal(x.size(), 1e-6f, 7);
  residual[3] = 65504.0f;
  residual[300] = -std::numeric_limits<float>::infinity();
  const std::vector<float> acc = Normal(x.size(), 1.0f, 8);
  for (WireCodec c : kCodecs) {
    ExpectDeviceMatchesCpu(c, x, nullptr, acc);
    ExpectDeviceMatchesCpu(c, x, &zero, acc);
    ExpectDeviceMatchesCpu(c, x, &residual, acc);
  }
}

// The conversions over the whole float range: patterns (i << 14) | random 14 bits for every i
// (all signs and exponents, mantissas at random), plus the exact fp16 and bf16 round-off ties
// and their neighbours in every exponent.
TEST(WireCodecGpu, FloatBitPatternSweepMatchesTheCpuCodec) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(11);
  std::vector<float> x;
  for (uint32_t i = 0; i < (1u << 18); ++i) x.push_back(Bits((i << 14) | (rng() & 0x3fffu)));
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t e = 0; e < 256; ++e) {
      for (uint32_t low :
           {0x0fffu, 0x1000u, 0x1001u, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u}) {
        x.push_back(Bits(sign | (e << 23) | (rng() & 0x7e0000u) | low));
      }
    }
  }
  const std::vector<float> acc(x.size(), 0.5f);
  // int8's blocks then hold whatever the sweep puts together (most contain inf or NaN; the
  // random data test covers the finite ones): the fp formats are what this sweep is for.
  for (WireCodec c : kCodecs) ExpectDeviceMatchesCpu(c, x, nullptr, acc);
}

// Decoding every fp16 and bf16 code, and int8 blocks of random bytes (scales of every kind:
// NaN, inf, subnormal, negative).
TEST(WireCodecGpu, DecodeOfArbitraryBytesMatchesTheCpuCodec) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  std::vector<uint8_t> all16(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    all16[2 * h] = static_cast<uint8_t>(h);
    all16[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::mt19937 rng(5);
  const size_t n8 = 256 * 40 + 3;
  std::vector<uint8_t> random8(EncodedBytes(WireCodec::kInt8, n8));
  for (uint8_t& b : random8) b = static_cast<uint8_t>(rng());
  struct Case {
    WireCodec c;
    const std::vector<uint8_t>* bytes;
    size_t n;
  };
  for (const Case& k :
       {Case{WireCodec::kFp16, &all16, 65536}, Case{WireCodec::kBf16, &all16, 65536},
        Case{WireCodec::kNone, &all16, 32768}, Case{WireCodec::kInt8, &random8, n8}}) {
    SCOPED_TRACE(WireCodecName(k.c));
    std::vector<float> want(k.n), want_acc = Normal(k.n, 1.0f, 9);
    Decode(k.c, k.bytes->data(), k.n, want.data());
    DeviceArray<float> dacc(want_acc);
    DecodeAdd(k.c, k.bytes->data(), k.n, want_acc.data());
    DeviceArray<uint8_t> din(*k.bytes);
    DeviceArray<float> dout(k.n);
    ASSERT_EQ(cuda::WireDecode(k.c, din.p, k.n, dout.p, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::WireDecodeAdd(k.c, din.p, k.n, dacc.p, nullptr), cudaSuccess);
    EXPECT_TRUE(SameFloatBits(want, dout.Download()));
    EXPECT_TRUE(SameFloatBits(want_acc, dacc.Download()));
  }
}

// The zero-chunk mask against a direct reading of its definition.
TEST(WireCodecGpu, ChunkMaskMarksChunksWithANonZeroValueOrResidual) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  // The last size has more mask bytes than the kernel's grid: its blocks loop.
  for (size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{2049}, size_t{256 * 19 + 5},
                   size_t{2048 * 8 * 256 + 300}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const size_t chunks = (n + 255) / 256;
    std::vector<float> data(n, 0.0f), residual(n, 0.0f);
    std::mt19937 rng(static_cast<uint32_t>(n));
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * 256, len = std::min<size_t>(256, n - begin);
      const size_t at = begin + rng() % len;
      switch (c % 6) {
        case 0:
          break;  // zero
        case 1:
          data[at] = 1e-3f;
          break;  // a value
        case 2:
          residual[at] = -1e-30f;
          break;  // only the residual
        case 3:
          data[at] = -0.0f;
          residual[begin] = -0.0f;
          break;  // -0 is zero
        case 4:
          data[at] = std::numeric_limits<float>::quiet_NaN();
          break;  // NaN is not zero
        case 5:
          data[begin + len - 1] = Bits(1);
          break;  // last element, subnormal
      }
    }
    auto want = [&](bool with_residual) {
      std::vector<uint8_t> m(cuda::WireChunkMaskBytes(n), 0);
      for (size_t i = 0; i < n; ++i) {
        if (data[i] != 0.0f || (with_residual && residual[i] != 0.0f)) {
          m[i / 256 / 8] |= static_cast<uint8_t>(1u << (i / 256 % 8));
        }
      }
      return m;
    };
    ASSERT_EQ(cuda::WireChunkMaskBytes(n), (chunks + 7) / 8);
    DeviceArray<float> dd(data), dr(residual);
    DeviceArray<uint8_t> mask(cuda::WireChunkMaskBytes(n));
    ASSERT_EQ(cuda::WireChunkNonZeroMask(dd.p, dr.p, n, mask.p, nullptr), cudaSuccess);
    EXPECT_EQ(mask.Download(), want(true));
    ASSERT_EQ(cuda::WireChunkNonZeroMask(dd.p, nullptr, n, mask.p, nullptr), cudaSuccess);
    EXPECT_EQ(mask.Download(), want(false));
  }
}

TEST(WireCodecGpu, MisalignedBuffersAreRefused) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
  DeviceArray<float> x(std::vector<float>(8, 1.0f));
  DeviceArray<uint8_t> out(64);
  EXPECT_EQ(cuda::WireEncode(WireCodec::kFp16, x.p, 8, nullptr, out.p + 2, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::WireDecode(WireCodec::kInt8, out.p + 1, 8, x.p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::WireEncode(WireCodec::kFp16, x.p, 0, nullptr, out.p + 2, nullptr), cudaSuccess);
}

}  // namespace
}  // namespace ringmaster::trainer
