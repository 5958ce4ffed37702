// TwoStageAllReduce (the compressed all-reduce of no_shard and of hybrid_shard's cross-node
// part) over a fake world of g threads that exchange buffers in memory.

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "trainer/dist/compression.h"

namespace ringmaster::trainer {
namespace {

// g ranks as threads; each collective publishes this rank's input, waits for every rank, copies
// what the real collective would deliver, and waits again before anyone reuses a buffer.
class ThreadWorld {
 public:
  explicit ThreadWorld(int g) : g_(g), in_(static_cast<size_t>(g)), barrier_(g) {}

  void Run(const std::function<void(int rank)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < g_; ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }

  AllToAllFn AllToAll(int rank) {
    return [this, rank](const void* in, void* out, size_t b) {
      in_[static_cast<size_t>(rank)] = static_cast<const uint8_t*>(in);
      barrier_.arrive_and_wait();
      for (int src = 0; src < g_; ++src) {
        std::memcpy(static_cast<uint8_t*>(out) + static_cast<size_t>(src) * b,
                    in_[static_cast<size_t>(src)] + static_cast<size_t>(rank) * b, b);
      }
      barrier_.arrive_and_wait();
      return absl::OkStatus();
    };
  }

  AllGatherFn AllGather(int rank) {
    return [this, rank](const void* in, void* out, size_t b) {
      in_[static_cast<size_t>(rank)] = static_cast<const uint8_t*>(in);
      barrier_.arrive_and_wait();
      for (int src = 0; src < g_; ++src) {
        std::memcpy(static_cast<uint8_t*>(out) + static_cast<size_t>(src) * b,
                    in_[static_cast<size_t>(src)], b);
      }
      barrier_.arrive_and_wait();
      return absl::OkStatus();
    };
  }

 private:
  const int g_;
  std::vector<const uint8_t*> in_;
  std::barrier<> barrier_;
};

constexpr float kGuard = 12345.0f;  // written past n; must survive every call

// Rank r's input: n values, scaled by rank so that ranks differ, plus 3 guard values.
std::vector<float> Input(int rank, size_t n, uint32_t seed) {
  std::mt19937 rng(seed + static_cast<uint32_t>(rank) * 7919u);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n + 3, kGuard);
  for (size_t i = 0; i < n; ++i) x[i] = normal(rng) * static_cast<float>(rank + 1);
  return x;
}

// Runs one call on every rank; returns each rank's data (with its guard values).
std::vector<std::vector<float>> RunOnce(WireCodec codec, int g, size_t n, uint32_t seed) {
  ThreadWorld world(g);
  std::vector<std::vector<float>> data(static_cast<size_t>(g));
  for (int r = 0; r < g; ++r) data[static_cast<size_t>(r)] = Input(r, n, seed);
  std::vector<absl::Status> status(static_cast<size_t>(g));
  world.Run([&](int r) {
    TwoStageScratch sc;
    status[static_cast<size_t>(r)] =
        TwoStageAllReduce(codec, g, data[static_cast<size_t>(r)].data(), n, nullptr, sc,
                          world.AllToAll(r), world.AllGather(r));
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
  return data;
}

// Sizes around the block boundaries: n < g (whole blocks of padding), n not a multiple of g,
// blocks that span one int8 block and more.
const size_t kSizes[] = {1, 2, 3, 5, 7, 255, 256, 257, 1000, 1023, 4099};

TEST(TwoStageAllReduceTest, FloatCodecIsTheExactSumInRankOrderOnEveryRank) {
  for (int g = 1; g <= 4; ++g) {
    for (size_t n : kSizes) {
      const auto out = RunOnce(WireCodec::kNone, g, n, 1);
      for (size_t i = 0; i < n; ++i) {
        float want = 0.0f;
        for (int r = 0; r < g; ++r) want = r == 0 ? Input(r, n, 1)[i] : want + Input(r, n, 1)[i];
        for (int r = 0; r < g; ++r) {
          ASSERT_EQ(out[static_cast<size_t>(r)][i], want) << "g=" << g << " n=" << n << " i=" << i;
        }
      }
      for (int r = 0; r < g; ++r) {
        for (size_t i = n; i < n + 3; ++i) ASSERT_EQ(out[static_cast<size_t>(r)][i], kGuard);
      }
    }
  }
}

TEST(TwoStageAllReduceTest, Int8IsWithinItsBoundAndBitIdenticalAcrossRanks) {
  for (int g = 2; g <= 4; ++g) {
    for (size_t n : kSizes) {
      const auto out = RunOnce(WireCodec::kInt8, g, n, 2);
      float amax = 0.0f;  // largest |x| over all ranks
      std::vector<double> exact(n, 0.0);
      for (int r = 0; r < g; ++r) {
        const auto x = Input(r, n, 2);
        for (size_t i = 0; i < n; ++i) {
          exact[i] += x[i];
          amax = std::max(amax, std::fabs(x[i]));
        }
      }
      // Stage 1: each of g codes is off by at most half a step, amax/254; stage 2 re-encodes a
      // sum of magnitude <= g·amax (+ stage 1's error), again half a step.
      const double bound = g * amax / 254.0 + 1.01 * g * amax / 254.0 + 1e-6;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(out[0][i] - exact[i]), bound) << "g=" << g << " n=" << n;
        for (int r = 1; r < g; ++r) ASSERT_EQ(out[static_cast<size_t>(r)][i], out[0][i]);
      }
      for (int r = 0; r < g; ++r) {
        for (size_t i = n; i < n + 3; ++i) ASSERT_EQ(out[static_cast<size_t>(r)][i], kGuard);
      }
    }
  }
}

// With error feedback, what is not delivered in one call is carried into the next: over K calls
// on the same input the delivered total is K times the exact sum minus what the residuals hold,
// at most half a step per source rank (stage 1) plus half a step of the sum (stage 2). Without
// it, values below half a step round to 0 every time and never arrive.
TEST(TwoStageAllReduceTest, Int8ErrorFeedbackDeliversWhatRoundingDrops) {
  constexpr int kCalls = 60;
  constexpr float kBig = 100.0f;
  for (int g : {2, 3}) {
    const size_t n = 700;
    // A large value every 64 (so every 256-float int8 block, however the ranks' blocks align,
    // holds some) and small ones of 1/16 to 1/8 of a step (step = kBig/127).
    std::vector<float> base(n);
    for (size_t i = 0; i < n; ++i) {
      base[i] = i % 64 == 0 ? kBig : 0.05f + 0.05f * static_cast<float>(i % 7) / 6.0f;
    }
    // Stage 1: g residuals of at most half a step (kBig/127) each; stage 2: half a step of the
    // sum, whose block maximum is g·kBig. Together g·kBig/127.
    const double held = g * kBig / 127.0 + 1e-3;
    for (bool feedback : {true, false}) {
      ThreadWorld world(g);
      std::vector<double> delivered(n, 0.0);  // rank 0's totals
      world.Run([&](int r) {
        TwoStageScratch sc;
        std::vector<float> residual(TwoStageResidualFloats(n, g), 0.0f);
        for (int k = 0; k < kCalls; ++k) {
          // Ranks' small values differ (x 1, 1.37, 1.74), so their codes arrive in different
          // calls and stage 2 has sums to round.
          std::vector<float> data = base;
          for (size_t i = 0; i < n; ++i) {
            if (i % 64 != 0) data[i] *= 1.0f + 0.37f * static_cast<float>(r);
          }
          absl::Status s = TwoStageAllReduce(WireCodec::kInt8, g, data.data(), n,
                                             feedback ? residual.data() : nullptr, sc,
                                             world.AllToAll(r), world.AllGather(r));
          EXPECT_TRUE(s.ok()) << s;
          if (r == 0) {
            for (size_t i = 0; i < n; ++i) delivered[i] += data[i];
          }
        }
      });
      int within = 0;
      for (size_t i = 0; i < n; ++i) {
        if (i % 64 == 0) continue;
        double want = 0;  // about 3g..6g
        for (int r = 0; r < g; ++r)
          want += kCalls * static_cast<double>(base[i] * (1.0f + 0.37f * r));
        if (std::fabs(delivered[i] - want) <= held) ++within;
      }
      const int small = static_cast<int>(n - (n + 63) / 64);
      // With feedback every small total is within what the residuals can hold; without, none.
      EXPECT_EQ(within, feedback ? small : 0) << "g=" << g << " feedback=" << feedback;
    }
  }
}

TEST(TwoStageAllReduceTest, AFailedCollectiveLeavesDataUntouched) {
  const size_t n = 1000;
  const std::vector<float> before = Input(0, n, 3);
  auto fail = [](const void*, void*, size_t) { return absl::UnavailableError("peer lost"); };
  auto fake_gather = [](const void* in, void* out, size_t b) {
    std::memcpy(out, in, b);  // rank 0 of 2 sees its own block twice, then fails below
    return absl::OkStatus();
  };
  TwoStageScratch sc;
  std::vector<float> data = before;
  std::vector<float> residual(TwoStageResidualFloats(n, 2), 0.0f);
  absl::Status s = TwoStageAllReduce(WireCodec::kInt8, 2, data.data(), n, residual.data(), sc, fail,
                                     fake_gather);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(data, before);
  auto ok_all_to_all = [](const void* in, void* out, size_t b) {
    std::memcpy(out, in, 2 * b);
    return absl::OkStatus();
  };
  s = TwoStageAllReduce(WireCodec::kInt8, 2, data.data(), n, residual.data(), sc, ok_all_to_all,
                        fail);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(data, before);
}

TEST(TwoStageAllReduceTest, WireBytesAndResidualSizes) {
  EXPECT_EQ(TwoStageResidualFloats(10, 4), 3u * 4 + 3);  // block 3
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 1000, 4), 2 * (4 + 250) * 3u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kFp16, 1000, 2), 2 * 1000u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 1000, 1), 0u);
}

}  // namespace
}  // namespace ringmaster::trainer
