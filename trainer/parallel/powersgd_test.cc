// Tests for PowerSGD (powersgd.h): several ranks simulated in one process, each on its own
// thread, with a summing fake collective.
#include "trainer/parallel/powersgd.h"

#include <gtest/gtest.h>

#include <algorithm>
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
