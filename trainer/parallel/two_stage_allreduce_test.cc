// TwoStageAllReduce (the compressed all-reduce of no_shard and of hybrid_shard's cross-node
// part) over a fake world of g threads that exchange buffers in memory.

#include "trainer/parallel/two_stage_allreduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

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

  // All-to-all: rank `rank` receives block `rank` of every source's input.
  AllToAllFn AllToAll(int rank) { return Exchange(rank, static_cast<size_t>(rank)); }
  // All-gather: every rank receives every source's whole (one-block) input.
  AllGatherFn AllGather(int rank) { return Exchange(rank, 0); }

 private:
  // Each rank publishes its input; out[src] = block `block` (of b bytes) of src's input.
  std::function<absl::Status(const void*, void*, size_t)> Exchange(int rank, size_t block) {
    return [this, rank, block](const void* in, void* out, size_t b) {
      in_[static_cast<size_t>(rank)] = static_cast<const uint8_t*>(in);
      barrier_.arrive_and_wait();
      for (int src = 0; src < g_; ++src) {
        std::memcpy(static_cast<uint8_t*>(out) + static_cast<size_t>(src) * b,
                    in_[static_cast<size_t>(src)] + block * b, b);
      }
      barrier_.arrive_and_wait();
      return absl::OkStatus();
    };
  }

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

// Runs one call on every rank on the given inputs; returns each rank's data and its stats.
struct Result {
  std::vector<std::vector<float>> data;
  std::vector<TwoStageStats> stats;
};
Result RunOn(WireCodec codec, int g, size_t n, std::vector<std::vector<float>> data, bool skip) {
  ThreadWorld world(g);
  std::vector<absl::Status> status(static_cast<size_t>(g));
  std::vector<TwoStageStats> stats(static_cast<size_t>(g));
  world.Run([&](int r) {
    const size_t i = static_cast<size_t>(r);
    TwoStageScratch sc;
    status[i] = TwoStageAllReduce(codec, g, r, data[i].data(), n, nullptr, skip, sc,
                                  world.AllToAll(r), world.AllGather(r), &stats[i]);
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
  return {std::move(data), std::move(stats)};
}

std::vector<std::vector<float>> RunOnce(WireCodec codec, int g, size_t n, uint32_t seed,
                                        bool skip = false) {
  std::vector<std::vector<float>> data(static_cast<size_t>(g));
  for (int r = 0; r < g; ++r) data[static_cast<size_t>(r)] = Input(r, n, seed);
  return RunOn(codec, g, n, std::move(data), skip).data;
}

// Sizes around the block boundaries: n < g (whole blocks of padding), n not a multiple of g,
// blocks that span one int8 block and more.
const size_t kSizes[] = {1, 2, 3, 5, 7, 255, 256, 257, 1000, 1023, 4099};

TEST(TwoStageAllReduceTest, FloatCodecIsTheExactSumInRankOrderOnEveryRank) {
  for (int g = 1; g <= 4; ++g) {
    for (size_t n : kSizes) {
      for (bool skip : {false, true}) {
        SCOPED_TRACE(skip ? "skipping zero blocks" : "dense");
        const auto out = RunOnce(WireCodec::kNone, g, n, 1, skip);
        std::vector<std::vector<float>> in;
        for (int r = 0; r < g; ++r) in.push_back(Input(r, n, 1));
        for (size_t i = 0; i < n; ++i) {
          float want = in[0][i];
          for (size_t r = 1; r < in.size(); ++r) want += in[r][i];
          for (int r = 0; r < g; ++r) {
            ASSERT_EQ(out[static_cast<size_t>(r)][i], want)
                << "g=" << g << " n=" << n << " i=" << i;
          }
        }
        for (int r = 0; r < g; ++r) {
          for (size_t i = n; i < n + 3; ++i) ASSERT_EQ(out[static_cast<size_t>(r)][i], kGuard);
        }
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
      for (bool skip : {false, true}) {
        ThreadWorld world(g);
        std::vector<double> delivered(n, 0.0);  // rank 0's totals
        world.Run([&](int r) {
          TwoStageScratch sc;
          std::vector<float> residual(TwoStageResidualFloats(n), 0.0f);
          for (int k = 0; k < kCalls; ++k) {
            // Ranks' small values differ (x 1, 1.37, 1.74), so their codes arrive in different
            // calls and stage 2 has sums to round.
            std::vector<float> data = base;
            for (size_t i = 0; i < n; ++i) {
              if (i % 64 != 0) data[i] *= 1.0f + 0.37f * static_cast<float>(r);
            }
            absl::Status s = TwoStageAllReduce(WireCodec::kInt8, g, r, data.data(), n,
                                               feedback ? residual.data() : nullptr, skip, sc,
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
        EXPECT_EQ(within, feedback ? small : 0)
            << "g=" << g << " feedback=" << feedback << " skip=" << skip;
      }
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
  std::vector<float> residual(TwoStageResidualFloats(n), 0.0f);
  absl::Status s = TwoStageAllReduce(WireCodec::kInt8, 2, 0, data.data(), n, residual.data(), false,
                                     sc, fail, fake_gather);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(data, before);
  auto ok_all_to_all = [](const void* in, void* out, size_t b) {
    std::memcpy(out, in, 2 * b);
    return absl::OkStatus();
  };
  s = TwoStageAllReduce(WireCodec::kInt8, 2, 0, data.data(), n, residual.data(), false, sc,
                        ok_all_to_all, fail);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(data, before);
  // With skipping, the mask all-gather is the first collective.
  s = TwoStageAllReduce(WireCodec::kInt8, 2, 0, data.data(), n, residual.data(), true, sc,
                        ok_all_to_all, fail);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(data, before);
  EXPECT_EQ(TwoStageAllReduce(WireCodec::kInt8, 2, 2, data.data(), n, nullptr, false, sc,
                              ok_all_to_all, fake_gather)
                .code(),
            absl::StatusCode::kInvalidArgument);  // rank out of range
}

TEST(TwoStageAllReduceTest, WireBytes) {
  // 10 active chunks over 4 ranks: runs of 3 chunks, 3 · 260 bytes of int8 per run.
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 10, 10, 4, false), 2 * 3 * 260 * 3u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 10, 100, 4, true), 2 * 3 * 260 * 3u + 13 * 3u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kFp16, 4, 4, 2, false), 2 * 2 * 512u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 0, 100, 2, true), 13u);
  EXPECT_EQ(TwoStageWireBytes(WireCodec::kInt8, 1000, 1000, 1, true), 0u);
}

// Rows of a table where only some rows have gradient, different ones on each rank (an embedding
// table's gradient): chunks zero on every rank are not sent, the sum is the same as without
// skipping, and the stats count what was sent.
std::vector<std::vector<float>> SparseInputs(int g, size_t n, uint32_t seed) {
  std::vector<std::vector<float>> data(static_cast<size_t>(g));
  for (int r = 0; r < g; ++r) {
    data[static_cast<size_t>(r)] = Input(r, n, seed);
    std::vector<float>& x = data[static_cast<size_t>(r)];
    // Keep chunk c on rank r when c % 10 == r (rank-own chunks) or c % 10 == 9 (shared).
    for (size_t i = 0; i < n; ++i) {
      const size_t c = i / kInt8BlockSize;
      if (c % 10 != static_cast<size_t>(r) && c % 10 != 9) x[i] = 0.0f;
    }
  }
  return data;
}

TEST(TwoStageAllReduceTest, SkippingSendsOnlyChunksNonZeroSomewhereAndChangesNoBit) {
  for (WireCodec codec : {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    for (int g : {1, 2, 3}) {
      for (size_t n : {size_t{0}, size_t{100}, size_t{256 * 40 + 17}, size_t{256 * 97}}) {
        SCOPED_TRACE(::testing::Message() << WireCodecName(codec) << " g=" << g << " n=" << n);
        const Result dense = RunOn(codec, g, n, SparseInputs(g, n, 4), false);
        const Result sparse = RunOn(codec, g, n, SparseInputs(g, n, 4), true);
        const size_t chunks = (n + 255) / 256;
        size_t want_active = 0;
        for (size_t c = 0; c < chunks; ++c)
          want_active += c % 10 < static_cast<size_t>(g) || c % 10 == 9;
        for (int r = 0; r < g; ++r) {
          const size_t i = static_cast<size_t>(r);
          EXPECT_EQ(sparse.stats[i].chunks, chunks);
          EXPECT_EQ(sparse.stats[i].active_chunks, want_active);
          EXPECT_EQ(dense.stats[i].active_chunks, chunks);
          EXPECT_EQ(sparse.stats[i].wire_bytes,
                    TwoStageWireBytes(codec, want_active, chunks, g, true));
          // Blocks are encoded on their own in both modes, so a chunk's sum does not depend on
          // which other chunks were sent (the runs' cut points differ).
          for (size_t k = 0; k < n + 3; ++k) {
            ASSERT_EQ(std::bit_cast<uint32_t>(sparse.data[i][k]),
                      std::bit_cast<uint32_t>(dense.data[i][k]))
                << "rank " << r << " element " << k;
          }
        }
        if (g > 1 && chunks > 10) {
          EXPECT_LT(sparse.stats[0].wire_bytes, dense.stats[0].wire_bytes / 2);
        }
      }
    }
  }
}

// A chunk that is zero in data but holds a residual on one rank is still sent (its residual
// must arrive), and with error feedback a touched chunk's residual decays to exactly zero, so
// it stops being sent a bounded number of calls after its last gradient.
TEST(TwoStageAllReduceTest, Int8ResidualsKeepChunksActiveUntilTheyDecayToZero) {
  constexpr int g = 2;
  const size_t n = 256 * 8;
  ThreadWorld world(g);
  std::vector<std::vector<size_t>> active(g);
  std::vector<double> delivered(n, 0.0);
  world.Run([&](int r) {
    TwoStageScratch sc;
    std::vector<float> residual(n, 0.0f);
    for (int k = 0; k < 40; ++k) {
      std::vector<float> data(n, 0.0f);
      if (k == 0) {
        // Only call 0 has gradient, in chunk 3 on rank 0 and chunk 5 on rank 1; values whose
        // int8 codes are far from exact.
        const size_t c = r == 0 ? 3 : 5;
        for (size_t i = 0; i < 256; ++i)
          data[c * 256 + i] = 0.001f * static_cast<float>(i % 37) + (i == 0 ? 1.0f : 0.0f);
      }
      TwoStageStats st;
      ASSERT_TRUE(TwoStageAllReduce(WireCodec::kInt8, g, r, data.data(), n, residual.data(), true,
                                    sc, world.AllToAll(r), world.AllGather(r), &st)
                      .ok());
      active[static_cast<size_t>(r)].push_back(st.active_chunks);
      if (r == 0) {
        for (size_t i = 0; i < n; ++i) delivered[i] += data[i];
      }
    }
    for (float v : residual) ASSERT_EQ(v, 0.0f) << "rank " << r;
  });
  EXPECT_EQ(active[0], active[1]);
  EXPECT_EQ(active[0][0], 2u);  // the two touched chunks
  EXPECT_EQ(active[0][1], 2u);  // sent again: their residuals
  // Decayed to zero: nothing left to send. Each call shrinks the largest residual at least
  // 254-fold (half an int8 step), so from about 2e-3 the values fall below 2^-126 after
  // ln(2e-3 / 1.2e-38) / ln(254) ≈ 15 calls; a few more for the stage-2 residuals.
  const auto first_zero = std::find(active[0].begin(), active[0].end(), 0u) - active[0].begin();
  EXPECT_LE(first_zero, 20);
  EXPECT_EQ(active[0].back(), 0u);
  // Everything was delivered, to within what rounding in fp32 accumulation leaves.
  for (size_t i = 0; i < 256; ++i) {
    const double want = 0.001 * static_cast<double>(i % 37) + (i == 0 ? 1.0 : 0.0);
    EXPECT_NEAR(delivered[3 * 256 + i], want, 1e-6) << i;
    EXPECT_NEAR(delivered[5 * 256 + i], want, 1e-6) << i;
  }
}

}  // namespace
}  // namespace ringmaster::trainer
