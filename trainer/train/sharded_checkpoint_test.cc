// Tests for sharded checkpoints: W ranks run as W threads sharing a barrier (which can be
// broken to simulate a dead peer); save/reshard round trips, pruning, listing, failed saves,
// and damaged checkpoints.
#include "trainer/train/sharded_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "trainer/io/safetensors.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Ranges = std::vector<std::pair<size_t, size_t>>;

// Generation-counting barrier for threads. Break() makes every current and later wait fail,
// as a collective barrier does when a peer dies. A wait that outlives the deadline breaks the
// barrier too, so a protocol bug fails the test instead of hanging it.
class TestBarrier {
 public:
  explicit TestBarrier(int n) : n_(n) {}

  absl::Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return absl::UnavailableError(reason_);
    const uint64_t gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return absl::OkStatus();
    }
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != gen || broken_; });
    if (generation_ != gen) return absl::OkStatus();
    if (!broken_) {
      broken_ = true;
      reason_ = "test barrier timed out (a rank skipped a barrier?)";
      cv_.notify_all();
    }
    return absl::UnavailableError(reason_);
  }

  void Break(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    reason_ = reason;
    cv_.notify_all();
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::string reason_;
};

// Runs fn(rank, barrier) on `world` threads. When fail_rank >= 0, that rank's fail_at-th
// barrier call (1-based) breaks the barrier and fails, as if the rank died there.
std::vector<absl::Status> RunRanks(
    int world, const std::function<absl::Status(int, const std::function<absl::Status()>&)>& fn,
    int fail_rank = -1, int fail_at = 0) {
  TestBarrier barrier(world);
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      int calls = 0;
      std::function<absl::Status()> b = [&, r]() -> absl::Status {
        ++calls;
        if (r == fail_rank && calls == fail_at) {
          barrier.Break(absl::StrCat("rank ", r, " died"));
          return absl::UnavailableError("this rank's link died");
        }
        return barrier.Wait();
      };
      results[r] = fn(r, b);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Range patterns. `units` are consecutive pieces of the flat buffer (like tensors).
Ranges PerUnit(const std::vector<size_t>& units, int world, int rank) {
  Ranges out;
  size_t a = 0;
  for (size_t n : units) {
    const size_t b = a + n * rank / world, e = a + n * (rank + 1) / world;
    if (b < e) out.emplace_back(b, e);
    a += n;
  }
  return out;
}
Ranges Blocks(size_t total, int world, int rank, size_t block) {
  Ranges out;
  for (size_t k = 0, b = 0; b < total; ++k, b += block) {
    if (static_cast<int>(k % world) == rank) out.emplace_back(b, std::min(total, b + block));
  }
  return out;
}
Ranges Contiguous(size_t total, int world, int rank) {
  return {{total * rank / world, total * (rank + 1) / world}};
}

const std::vector<size_t> kUnits = {7, 1, 13, 64, 3, 29, 2, 100, 1};
size_t Total() {
  size_t t = 0;
  for (size_t n : kUnits) t += n;
  return t;
}

// Three global buffers whose elements all differ (distinct bit patterns).
struct Global {
  std::vector<float> params, exp_avg, exp_avg_sq;
  explicit Global(size_t total, uint32_t salt = 0) {
    for (size_t i = 0; i < total; ++i) {
      params.push_back(std::bit_cast<float>(uint32_t{0x3f800000} + salt + uint32_t(i)));
      exp_avg.push_back(std::bit_cast<float>(uint32_t{0xbf000000} + salt + uint32_t(i)));
      exp_avg_sq.push_back(std::bit_cast<float>(uint32_t{0x38000000} + salt + uint32_t(i)));
    }
  }
};

std::vector<float> Gather(const std::vector<float>& g, const Ranges& ranges) {
  std::vector<float> out;
  for (const auto& [b, e] : ranges) out.insert(out.end(), g.begin() + b, g.begin() + e);
  return out;
}

// Bitwise comparison (EXPECT_EQ on vectors of float would also accept -0 == 0).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr char kFingerprint[] = "bert-tiny, 9 units";

CheckpointMeta MakeMeta(int64_t step) {
  CheckpointMeta m;
  m.step = step;
  m.epoch = 3;
  m.cursor = 41;
  m.samples_seen = 123456789012LL;
  m.seed = 0xfedcba9876543210ULL;
  m.fingerprint = kFingerprint;
  m.total = Total();
  m.world_size = 2;
  m.sharding = "per-unit";
  m.extra = {{"compression", {{"kind", "powersgd"}, {"rank", 4}, {"errors", {1.5, -2.25}}}},
             {"note", "hello"}};
  m.settings = {{"train.lr", "0.001"}, {"data.train", "/d/train.tsv (123 bytes)"}};
  return m;
}

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("sharded_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Out() const { return dir_.string(); }
  std::string StepDir(int64_t step) const {
    char name[32];
    std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
    return (dir_ / "checkpoints" / name).string();
  }
  std::string TmpDir(int64_t step) const {
    return (fs::path(StepDir(step)).parent_path() /
            (".tmp-" + fs::path(StepDir(step)).filename().string()))
        .string();
  }

  // Saves `g` at `world` ranks with rank r holding pattern(r); returns each rank's status.
  std::vector<absl::Status> Save(const Global& g, int world,
                                 const std::function<Ranges(int)>& pattern,
                                 const CheckpointMeta& meta, int keep = 0, int fail_rank = -1,
                                 int fail_at = 0) {
    return RunRanks(
        world,
        [&](int rank, const std::function<absl::Status()>& barrier) {
          ShardRanges mine{pattern(rank)};
          const std::vector<float> p = Gather(g.params, mine.ranges);
          const std::vector<float> m = Gather(g.exp_avg, mine.ranges);
          const std::vector<float> v = Gather(g.exp_avg_sq, mine.ranges);
          return SaveShardedCheckpoint(Out(), rank, world, meta, mine, p.data(), m.data(), v.data(),
                                       keep, barrier);
        },
        fail_rank, fail_at);
  }

  void SaveOk(const Global& g, int world, const std::function<Ranges(int)>& pattern,
              const CheckpointMeta& meta, int keep = 0) {
    const std::vector<absl::Status> st = Save(g, world, pattern, meta, keep);
    for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  }

  // Loads `dir` at `world` ranks (concurrently) with pattern(r) and checks every element.
  void ExpectLoads(const std::string& dir, const Global& g, int world,
                   const std::function<Ranges(int)>& pattern, bool covers_all = true) {
    std::vector<absl::StatusOr<LoadedShard>> got(world, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        got[r] = LoadShardedCheckpoint(dir, Total(), kFingerprint, ShardRanges{pattern(r)});
      });
    }
    for (std::thread& t : threads) t.join();
    size_t covered = 0;
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(absl::StrCat("loading rank ", r, " of ", world));
      ASSERT_TRUE(got[r].ok()) << got[r].status();
      const Ranges want = pattern(r);
      EXPECT_TRUE(SameBits(got[r]->params, Gather(g.params, want)));
      EXPECT_TRUE(SameBits(got[r]->exp_avg, Gather(g.exp_avg, want)));
      EXPECT_TRUE(SameBits(got[r]->exp_avg_sq, Gather(g.exp_avg_sq, want)));
      covered += got[r]->params.size();
    }
    if (covers_all) {
      EXPECT_EQ(covered, Total());
    }
  }

  fs::path dir_;
};

void ExpectMetaEq(const CheckpointMeta& got, const CheckpointMeta& want, int world) {
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.epoch, want.epoch);
  EXPECT_EQ(got.cursor, want.cursor);
  EXPECT_EQ(got.samples_seen, want.samples_seen);
  EXPECT_EQ(got.seed, want.seed);
  EXPECT_EQ(got.fingerprint, want.fingerprint);
  EXPECT_EQ(got.total, want.total);
  EXPECT_EQ(got.world_size, world);
  EXPECT_EQ(got.sharding, want.sharding);
  EXPECT_EQ(got.extra, want.extra) << got.extra.dump();
  EXPECT_EQ(got.settings, want.settings);
}

TEST(ShardRangesTest, LocalNumel) {
  EXPECT_EQ((ShardRanges{{{0, 3}, {5, 5}, {7, 10}}}).local_numel(), 6u);
  EXPECT_EQ(ShardRanges{}.local_numel(), 0u);
}

TEST(ShardedPatterns, PatternsTile) {
  // Sanity of the test's own patterns: every element held exactly once.
  for (int world : {1, 2, 3, 4}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<int> count(Total(), 0);
      for (int r = 0; r < world; ++r) {
        const Ranges rs = pattern == 0   ? PerUnit(kUnits, world, r)
                          : pattern == 1 ? Blocks(Total(), world, r, 7)
                                         : Contiguous(Total(), world, r);
        for (const auto& [b, e] : rs) {
          for (size_t i = b; i < e; ++i) ++count[i];
        }
      }
      for (size_t i = 0; i < Total(); ++i) {
        ASSERT_EQ(count[i], 1) << "world " << world << " pattern " << pattern << " i " << i;
      }
    }
  }
}

class ReshardTest : public ShardedCheckpointTest, public ::testing::WithParamInterface<int> {};

// Param 0: saved with per-unit sharding; 1: saved with round-robin blocks of 10.
TEST_P(ReshardTest, SaveAtTwoLoadAtOneThreeFour) {
  const Global g(Total());
  const CheckpointMeta meta = MakeMeta(200);
  std::function<Ranges(int)> save_pattern = [](int r) { return PerUnit(kUnits, 2, r); };
  if (GetParam() == 1) save_pattern = [](int r) { return Blocks(Total(), 2, r, 10); };
  ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, save_pattern, meta));

  const std::vector<std::string> list = ListShardedCheckpoints(Out());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0], StepDir(200));
  EXPECT_FALSE(fs::exists(TmpDir(200)));
  EXPECT_TRUE(fs::exists(fs::path(StepDir(200)) / "shard-00000-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(StepDir(200)) / "shard-00001-of-00002.safetensors"));

  absl::StatusOr<CheckpointMeta> m = ReadCheckpointMeta(StepDir(200));
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectMetaEq(*m, meta, 2);

  ExpectLoads(StepDir(200), g, 1, [](int) { return Ranges{{0, Total()}}; });
  ExpectLoads(StepDir(200), g, 2, [](int r) { return PerUnit(kUnits, 2, r); });
  ExpectLoads(StepDir(200), g, 3, [](int r) { return Contiguous(Total(), 3, r); });
  ExpectLoads(StepDir(200), g, 3, [](int r) { return Blocks(Total(), 3, r, 7); });
  ExpectLoads(StepDir(200), g, 4, [](int r) { return PerUnit(kUnits, 4, r); });

  absl::StatusOr<LoadedShard> one =
      LoadShardedCheckpoint(StepDir(200), Total(), kFingerprint, ShardRanges{{{0, Total()}}});
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectMetaEq(one->meta, meta, 2);
}

INSTANTIATE_TEST_SUITE_P(SavePatterns, ReshardTest, ::testing::Values(0, 1));

TEST_F(ShardedCheckpointTest, RankHoldingNothingAndEmptyLoad) {
  const Global g(Total());
  // World 3: ranks 0 and 1 split per unit, rank 2 holds nothing.
  ASSERT_NO_FATAL_FAILURE(SaveOk(
      g, 3, [](int r) { return r == 2 ? Ranges{} : PerUnit(kUnits, 2, r); }, MakeMeta(1)));
  ExpectLoads(StepDir(1), g, 2, [](int r) { return Contiguous(Total(), 2, r); });
  absl::StatusOr<LoadedShard> none =
      LoadShardedCheckpoint(StepDir(1), Total(), kFingerprint, ShardRanges{});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->params.empty());
  EXPECT_EQ(none->meta.world_size, 3);
}

// Issue #20, item 2: a checkpoints/ planted as a link to a directory elsewhere is not written
// through: every rank's save fails naming the link and nothing lands outside output_dir.
TEST_F(ShardedCheckpointTest, APlantedCheckpointsLinkIsNotFollowed) {
  const fs::path outside = dir_.string() + "_outside";
  fs::remove_all(outside);
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, dir_ / "checkpoints");
  const Global g(Total());
  const std::vector<absl::Status> st = Save(
      g, 2, [](int r) { return PerUnit(kUnits, 2, r); }, MakeMeta(1));
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(st[r].ok()) << "rank " << r;
  }
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("symbolic link"));
  EXPECT_TRUE(fs::is_empty(outside));
  fs::remove_all(outside);
}

TEST_F(ShardedCheckpointTest, SameStepSavedAgainReplacesIt) {
  const Global g1(Total()), g2(Total(), 5000);
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  ASSERT_NO_FATAL_FAILURE(SaveOk(g1, 2, pat, MakeMeta(9)));
  ASSERT_NO_FATAL_FAILURE(SaveOk(g2, 2, pat, MakeMeta(9)));
  ExpectLoads(StepDir(9), g2, 1, [](int) { return Ranges{{0, Total()}}; });
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "checkpoints")) {
    ++entries;
    EXPECT_EQ(e.path().string(), StepDir(9));
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(ShardedCheckpointTest, KeepPrunesAndListIgnoresIncomplete) {
  const Global g(Total());
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  for (int64_t step : {10, 20, 30}) {
    ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, pat, MakeMeta(step), /*keep=*/2));
  }
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(20), StepDir(30)));
  EXPECT_FALSE(fs::exists(StepDir(10)));

  // Not complete checkpoints: a temp dir (even with a manifest), a dir without manifest, a
  // moved-aside dir, a plain file.
  fs::create_directories(TmpDir(40));
  std::ofstream(fs::path(TmpDir(40)) / "manifest.json") << "{}";
  fs::create_directories(StepDir(50));
  fs::create_directories(StepDir(60) + ".old-x");
  std::ofstream(fs::path(StepDir(60) + ".old-x") / "manifest.json") << "{}";
  std::ofstream(StepDir(70)) << "not a dir";
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(20), StepDir(30)));

  // Sorted by step number, also past 8 digits.
  fs::create_directories(StepDir(123456789));
  std::ofstream(fs::path(StepDir(123456789)) / "manifest.json") << "{}";
  EXPECT_THAT(ListShardedCheckpoints(Out()),
              ::testing::ElementsAre(StepDir(20), StepDir(30), StepDir(123456789)));
  fs::remove_all(StepDir(123456789));

  // A save of an older step than the kept ones is never pruned right away.
  ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, pat, MakeMeta(5), /*keep=*/2));
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(5), StepDir(30)));
  // The incomplete leftovers are not touched by pruning.
  EXPECT_TRUE(fs::exists(StepDir(50)));
  EXPECT_TRUE(fs::exists(TmpDir(40)));

  EXPECT_TRUE(ListShardedCheckpoints((dir_ / "nowhere").string()).empty());
}

struct DeadPeer {
  int rank, at_call;
};

class DeadPeerTest : public ShardedCheckpointTest,
                     public ::testing::WithParamInterface<DeadPeer> {};

TEST_P(DeadPeerTest, NoStepDirAndPreviousStaysLatest) {
  const Global g(Total()), g2(Total(), 777);
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, pat, MakeMeta(10)));

  const std::vector<absl::Status> st =
      Save(g2, 2, pat, MakeMeta(20), 0, GetParam().rank, GetParam().at_call);
  EXPECT_FALSE(st[0].ok());
  EXPECT_FALSE(st[1].ok());
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("barrier"));
  EXPECT_FALSE(fs::exists(StepDir(20)));
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(10)));
  ExpectLoads(StepDir(10), g, 1, [](int) { return Ranges{{0, Total()}}; });

  // The next save of that step succeeds over the leftover temporary directory.
  ASSERT_NO_FATAL_FAILURE(SaveOk(g2, 2, pat, MakeMeta(20)));
  ExpectLoads(StepDir(20), g2, 1, [](int) { return Ranges{{0, Total()}}; });
  EXPECT_FALSE(fs::exists(TmpDir(20)));
}

INSTANTIATE_TEST_SUITE_P(Barriers, DeadPeerTest,
                         ::testing::Values(DeadPeer{1, 1}, DeadPeer{1, 2}, DeadPeer{0, 1},
                                           DeadPeer{0, 2}));

TEST_F(ShardedCheckpointTest, DeadPeerAtLastBarrierAfterCommit) {
  // Rank 0 commits before the last barrier: the checkpoint is complete, but both ranks report
  // the failure.
  const Global g(Total());
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  const std::vector<absl::Status> st = Save(g, 2, pat, MakeMeta(3), 0, /*fail_rank=*/1, 3);
  EXPECT_FALSE(st[0].ok());
  EXPECT_FALSE(st[1].ok());
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("committed"));
  ExpectLoads(StepDir(3), g, 1, [](int) { return Ranges{{0, Total()}}; });
}

TEST_F(ShardedCheckpointTest, LocalFailureOnOneRankFailsAllWithoutHanging) {
  const Global g(Total());
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, pat, MakeMeta(10)));
  const CheckpointMeta meta = MakeMeta(20);
  const std::vector<absl::Status> st =
      RunRanks(2, [&](int rank, const std::function<absl::Status()>& barrier) {
        ShardRanges mine{pat(rank)};
        const std::vector<float> p = Gather(g.params, mine.ranges);
        // Rank 1 passes a null exp_avg: a local error.
        const float* m = rank == 1 ? nullptr : p.data();
        return SaveShardedCheckpoint(Out(), rank, 2, meta, mine, p.data(), m, p.data(), 0, barrier);
      });
  EXPECT_EQ(st[1].code(), absl::StatusCode::kInvalidArgument) << st[1];
  EXPECT_FALSE(st[0].ok());
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("rank 1 did not report"));
  EXPECT_FALSE(fs::exists(StepDir(20)));
  EXPECT_FALSE(fs::exists(TmpDir(20)));
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(10)));
}

TEST_F(ShardedCheckpointTest, FailedSaveNeverPrunesThePreviousCheckpoint) {
  // keep = 1 and the next save fails (as on a full disk, tests/faults/disk_full_checkpoint.sh):
  // pruning runs only after a commit, so the previous checkpoint stays the latest.
  const Global g(Total()), g2(Total(), 5);
  auto pat = [](int r) { return PerUnit(kUnits, 2, r); };
  ASSERT_NO_FATAL_FAILURE(SaveOk(g, 2, pat, MakeMeta(10), /*keep=*/1));
  const std::vector<absl::Status> st = Save(g2, 2, pat, MakeMeta(20), /*keep=*/1,
                                            /*fail_rank=*/1, /*fail_at=*/2);
  EXPECT_FALSE(st[0].ok());
  EXPECT_FALSE(fs::exists(StepDir(20)));
  EXPECT_THAT(ListShardedCheckpoints(Out()), ::testing::ElementsAre(StepDir(10)));
  ExpectLoads(StepDir(10), g, 1, [](int) { return Ranges{{0, Total()}}; });
}

TEST_F(ShardedCheckpointTest, RangesNotTilingFailAtSave) {
  const Global g(Total());
  const size_t t = Total();
  // Gap [100, 110).
  std::vector<absl::Status> st = Save(
      g, 2,
      [t](int r) {
        return r == 0 ? Ranges{{0, 100}} : Ranges{{110, t}};
      },
      MakeMeta(1));
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument) << st[0];
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("do not tile"));
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("[100, 110)"));
  EXPECT_FALSE(st[1].ok());
  // Overlap [100, 120).
  st = Save(
      g, 2,
      [t](int r) {
        return r == 0 ? Ranges{{0, 120}} : Ranges{{100, t}};
      },
      MakeMeta(1));
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("held by both rank 0 and rank 1"));
  EXPECT_FALSE(st[1].ok());
  // Short of total.
  st = Save(
      g, 2,
      [t](int r) {
        return r == 0 ? Ranges{{0, 100}} : Ranges{{100, t - 1}};
      },
      MakeMeta(1));
  EXPECT_THAT(std::string(st[0].message()), HasSubstr("do not tile"));
  // A rank's own ranges out of order.
  st = Save(
      g, 2,
      [t](int r) {
        return r == 0 ? Ranges{{50, 100}, {0, 50}} : Ranges{{100, t}};
      },
      MakeMeta(1));
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument) << st[0];
  EXPECT_FALSE(st[1].ok());

  EXPECT_FALSE(fs::exists(StepDir(1)));
  EXPECT_FALSE(fs::exists(TmpDir(1)));
  EXPECT_TRUE(ListShardedCheckpoints(Out()).empty());
}

TEST_F(ShardedCheckpointTest, FailedResaveOfSameStepIsReportedByEveryRank) {
  // An older complete step-1 exists; a failed save of step 1 must not look committed to rank 1.
  const Global g(Total()), g2(Total(), 99);
  const size_t t = Total();
  ASSERT_NO_FATAL_FAILURE(SaveOk(
      g, 2, [](int r) { return PerUnit(kUnits, 2, r); }, MakeMeta(1)));
  const std::vector<absl::Status> st = Save(
      g2, 2,
      [t](int r) {
        return r == 0 ? Ranges{{0, 100}} : Ranges{{110, t}};
      },
      MakeMeta(1));
  EXPECT_FALSE(st[0].ok());
  EXPECT_FALSE(st[1].ok());
  EXPECT_THAT(std::string(st[1].message()), HasSubstr("rank 0 did not commit"));
  ExpectLoads(StepDir(1), g, 1, [](int) { return Ranges{{0, Total()}}; });
}

class DamageTest : public ShardedCheckpointTest {
 protected:
  void SetUp() override {
    ShardedCheckpointTest::SetUp();
    ASSERT_NO_FATAL_FAILURE(SaveOk(
        g_, 2, [](int r) { return PerUnit(kUnits, 2, r); }, MakeMeta(7)));
    shard0_ = (fs::path(StepDir(7)) / "shard-00000-of-00002.safetensors").string();
    shard1_ = (fs::path(StepDir(7)) / "shard-00001-of-00002.safetensors").string();
    manifest_ = (fs::path(StepDir(7)) / "manifest.json").string();
  }

  absl::Status LoadAll(const std::string& fingerprint = kFingerprint, size_t total = Total()) {
    return LoadShardedCheckpoint(StepDir(7), total, fingerprint, ShardRanges{{{0, Total()}}})
        .status();
  }

  void ExpectDataLossNaming(const absl::Status& s, const std::string& path) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  }

  nlohmann::json Manifest() {
    std::ifstream in(manifest_);
    return nlohmann::json::parse(in);
  }
  void WriteManifest(const nlohmann::json& j) { std::ofstream(manifest_) << j.dump(); }

  const Global g_{Total()};
  std::string shard0_, shard1_, manifest_;
};

TEST_F(DamageTest, IntactLoads) { EXPECT_TRUE(LoadAll().ok()) << LoadAll(); }

TEST_F(DamageTest, TruncatedShard) {
  fs::resize_file(shard1_, fs::file_size(shard1_) - 5);
  ExpectDataLossNaming(LoadAll(), shard1_);
  // A rank that needs nothing from the damaged shard does not open it.
  ExpectLoads(
      StepDir(7), g_, 1, [](int) { return PerUnit(kUnits, 2, 0); }, /*covers_all=*/false);
}

TEST_F(DamageTest, FlippedByteInTensor) {
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(shard0_);
  ASSERT_TRUE(r.ok()) << r.status();
  const TensorInfo* t = (*r)->Find("exp_avg");
  ASSERT_NE(t, nullptr);
  ASSERT_GT(t->end - t->begin, 13u);
  const size_t offset = t->begin;  // relative to the start of the data buffer
  r->reset();
  std::string bytes;
  {
    std::ifstream in(shard0_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  bytes[8 + header_len + offset + 13] ^= 0x10;
  std::ofstream(shard0_, std::ios::binary | std::ios::trunc) << bytes;
  const absl::Status s = LoadAll();
  ExpectDataLossNaming(s, shard0_);
  EXPECT_THAT(std::string(s.message()), HasSubstr("checksum"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("exp_avg"));
}

TEST_F(DamageTest, DeletedShard) {
  fs::remove(shard0_);
  ExpectDataLossNaming(LoadAll(), shard0_);
}

TEST_F(DamageTest, GarbageManifest) {
  std::ofstream(manifest_) << "{\"step\": 7, garbage";
  ExpectDataLossNaming(LoadAll(), manifest_);
  ExpectDataLossNaming(ReadCheckpointMeta(StepDir(7)).status(), manifest_);
}

TEST_F(DamageTest, MissingManifestAndMissingDir) {
  fs::remove(manifest_);
  ExpectDataLossNaming(LoadAll(), manifest_);
  EXPECT_EQ(ReadCheckpointMeta((dir_ / "nowhere").string()).status().code(),
            absl::StatusCode::kNotFound);
}

// Issue #31: a checkpoint is read below its output directory following no link. A shard or a
// manifest replaced by a link to an intact copy elsewhere, or a whole step directory replaced by
// one, is refused naming it; the step directory link is still listed, so that a resume names it
// instead of passing it over.
TEST_F(DamageTest, LinksPlantedInACheckpointAreRefused) {
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  fs::copy(StepDir(7), outside / "step-7");
  fs::remove(shard0_);
  fs::create_symlink(outside / "step-7" / fs::path(shard0_).filename(), shard0_);
  absl::Status s = LoadAll();
  ExpectDataLossNaming(s, shard0_);
  EXPECT_THAT(std::string(s.message()), HasSubstr("symbolic link"));

  fs::remove(manifest_);
  fs::create_symlink(outside / "step-7" / "manifest.json", manifest_);
  s = ReadCheckpointMeta(StepDir(7)).status();
  ExpectDataLossNaming(s, manifest_);
  EXPECT_THAT(std::string(s.message()), HasSubstr("symbolic link"));

  fs::remove_all(StepDir(7));
  fs::create_directory_symlink(outside / "step-7", StepDir(7));
  EXPECT_THAT(ListShardedCheckpoints(dir_.string()), ::testing::ElementsAre(StepDir(7)));
  EXPECT_TRUE(ListCheckpointsWithoutManifest(dir_.string()).empty());
  s = LoadAll();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(StepDir(7) + " is a symbolic link; checkpoints are read below"));
  EXPECT_TRUE(fs::is_regular_file(outside / "step-7" / "manifest.json"));
}

TEST_F(DamageTest, ManifestWithWrongFields) {
  const nlohmann::json good = Manifest();
  nlohmann::json j = good;
  j["shards"][1]["ranges"][0][0] = j["shards"][1]["ranges"][0][0].get<size_t>() + 1;
  WriteManifest(j);
  ExpectDataLossNaming(LoadAll(), manifest_);
  EXPECT_THAT(std::string(LoadAll().message()), HasSubstr("tile"));

  j = good;
  j["shards"][0]["file"] = "../../escape.safetensors";
  WriteManifest(j);
  ExpectDataLossNaming(LoadAll(), manifest_);

  j = good;
  j["shards"][0]["bytes"] = j["shards"][0]["bytes"].get<uint64_t>() + 8;
  WriteManifest(j);
  ExpectDataLossNaming(LoadAll(), shard0_);

  j = good;
  j["shards"].erase(1);
  WriteManifest(j);
  ExpectDataLossNaming(LoadAll(), manifest_);

  j = good;
  j["total"] = -3;
  WriteManifest(j);
  ExpectDataLossNaming(LoadAll(), manifest_);

  WriteManifest(good);
  EXPECT_TRUE(LoadAll().ok()) << LoadAll();
}

// Another model's checkpoint stops a resume (FailedPrecondition); a manifest of this model whose
// total disagrees with its fingerprint is damage (DataLoss), which a resume skips (issue #20).
TEST_F(DamageTest, FingerprintMismatchIsFailedPreconditionAndTotalMismatchIsDamage) {
  EXPECT_EQ(LoadAll("bert-large").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LoadAll("bert-large", Total() + 1).code(), absl::StatusCode::kFailedPrecondition);
  const absl::Status total = LoadAll(kFingerprint, Total() + 1);
  ExpectDataLossNaming(total, manifest_);
  EXPECT_THAT(std::string(total.message()), HasSubstr("contradicts the fingerprint"));
}

TEST_F(DamageTest, BadRequestedRanges) {
  EXPECT_EQ(
      LoadShardedCheckpoint(StepDir(7), Total(), kFingerprint, ShardRanges{{{0, Total() + 1}}})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      LoadShardedCheckpoint(StepDir(7), Total(), kFingerprint, ShardRanges{{{10, 20}, {15, 30}}})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::trainer
