// The rank status block: what the trainer writes is what another reader of the file sees, and a
// file that is not a status block is refused with an error naming it.
#include "common/rank_status.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {
namespace {

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "rank_status.XXXXXX").string();
  EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

TEST(RankStatusTest, FileReaderSeesWhatTheWriterRecorded) {
  const std::string dir = TempDir();
  const std::string path = dir + "/rank3.status";
  auto status = RankStatus::CreateFile(path);
  ASSERT_TRUE(status.ok()) << status.status();
  RankStatus& s = **status;
  s.OnStart(4, 100);
  StepFigures f;
  f.step = 7;
  f.loss = 0.625;
  f.learning_rate = 2e-5;
  f.grad_norm = 1.5;
  f.seconds = 0.3;  // bucket 0.5
  f.data_wait_seconds = 0.01;
  f.samples = 8;
  f.tokens = 300;
  f.unix_time = 1700000000.25;
  s.OnStep(f, CommTotals{100, 400, 110});
  f.seconds = 70;    // +Inf bucket
  f.skipped = true;  // an fp16 overflow
  f.loss_scale = 32768;
  s.OnStep(f, CommTotals{200, 800, 220});
  s.OnEval(0.5, 0.875);
  s.OnCheckpoint(0.2, 4096);
  s.OnMemory(1000, 250);
  s.OnDevice(DeviceFigures{3000, 5000, 700, 0.0625, 2.5, 0.015625, 0.75, 0.0078125, 0.375});
  s.OnEnter(41, Collective::kAllGather);
  s.OnLeave(41, Collective::kAllGather, 0.125);
  s.OnEnter(42, Collective::kReduceScatterSum);

  absl::StatusOr<RankFigures> got = ReadRankStatusFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  const RankFigures& r = *got;
  EXPECT_EQ(r.pid, ::getpid());
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.steps_planned, 100);
  EXPECT_EQ(r.steps_total, 2);
  EXPECT_EQ(r.skipped_steps_total, 1u);
  EXPECT_DOUBLE_EQ(r.loss_scale, 32768);
  EXPECT_EQ(r.step, 7);
  EXPECT_EQ(r.samples_total, 16u);
  EXPECT_EQ(r.tokens_total, 600u);
  EXPECT_DOUBLE_EQ(r.loss, 0.625);
  EXPECT_DOUBLE_EQ(r.learning_rate, 2e-5);
  EXPECT_DOUBLE_EQ(r.grad_norm, 1.5);
  EXPECT_NEAR(r.data_wait_seconds, 0.02, 1e-9);
  EXPECT_NEAR(r.last_step_unix, 1700000000.25, 1e-6);
  ASSERT_EQ(r.step_seconds.counts.size(), kStepSecondsBounds.size() + 1);
  EXPECT_EQ(r.step_seconds.counts[6], 1u);  // 0.3 s: le=0.5
  EXPECT_EQ(r.step_seconds.counts.back(), 1u);
  EXPECT_EQ(r.step_seconds.count, 2u);
  EXPECT_NEAR(r.step_seconds.sum, 70.3, 1e-6);
  EXPECT_TRUE(r.has_eval);
  EXPECT_DOUBLE_EQ(r.eval_accuracy, 0.875);
  EXPECT_EQ(r.checkpoint_seconds.count, 1u);
  EXPECT_EQ(r.checkpoint_bytes_total, 4096u);
  EXPECT_EQ(r.gather_bytes, 200u);
  EXPECT_EQ(r.reduce_raw_bytes, 800u);
  EXPECT_EQ(r.reduce_wire_bytes, 220u);
  EXPECT_TRUE(r.has_memory);
  EXPECT_EQ(r.state_persistent_bytes, 1000u);
  EXPECT_TRUE(r.has_device);
  EXPECT_EQ(r.device.allocated_bytes, 3000u);
  EXPECT_EQ(r.device.peak_allocated_bytes, 5000u);
  EXPECT_EQ(r.device.arena_bytes, 700u);
  EXPECT_NEAR(r.device.step_seconds, 0.0625, 1e-9);
  EXPECT_NEAR(r.device.busy_seconds_total, 2.5, 1e-9);
  EXPECT_NEAR(r.device.comm_seconds, 0.015625, 1e-9);
  EXPECT_NEAR(r.device.comm_seconds_total, 0.75, 1e-9);
  EXPECT_NEAR(r.device.exposed_comm_seconds, 0.0078125, 1e-9);
  EXPECT_NEAR(r.device.exposed_comm_seconds_total, 0.375, 1e-9);
  EXPECT_EQ(r.collective_seq, 42u);
  EXPECT_EQ(r.collective_op, Collective::kReduceScatterSum);
  EXPECT_TRUE(r.in_collective);
  EXPECT_GT(r.collective_entered_unix, 1.7e9);
  EXPECT_NEAR(r.comm_seconds[static_cast<int>(Collective::kAllGather)], 0.125, 1e-9);
  EXPECT_NEAR(r.comm_seconds_total(), 0.125, 1e-9);

  s.OnLeave(42, Collective::kReduceScatterSum, 0.5);
  got = ReadRankStatusFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->in_collective);
  EXPECT_EQ(got->collective_seq, 42u);
  EXPECT_NEAR(got->comm_seconds_total(), 0.625, 1e-9);
  std::filesystem::remove_all(dir);
}

// A leave that arrives after a later collective was entered (two threads) must not mark the
// later one as left.
TEST(RankStatusTest, LateLeaveOfAnEarlierCollectiveKeepsTheLaterOneOpen) {
  auto s = RankStatus::CreateAnonymous();
  s->OnEnter(1, Collective::kAllReduceSum);
  s->OnEnter(2, Collective::kBroadcast);
  s->OnLeave(1, Collective::kAllReduceSum, 0.1);
  RankFigures r = s->Snapshot();
  EXPECT_EQ(r.collective_seq, 2u);
  EXPECT_TRUE(r.in_collective);
  EXPECT_EQ(r.collective_op, Collective::kBroadcast);
}

// Concurrent writer and reader: every read sees a collective number and name that belong
// together (odd numbers are AllGather, even ones Barrier here).
TEST(RankStatusTest, ReaderNeverSeesATornCollective) {
  const std::string dir = TempDir();
  const std::string path = dir + "/r.status";
  auto status = RankStatus::CreateFile(path);
  ASSERT_TRUE(status.ok());
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::thread writer([&] {
    // At least 200000 collectives, and on until the reader has had 100 consistent reads (a
    // writer that finished before the reader started made the test fail 1 run in 40), within a
    // bound so a reader that never gets one still ends the test (and fails it).
    for (uint64_t seq = 1; seq <= 200000 || (reads.load() < 100 && seq <= 50000000); ++seq) {
      const Collective op = seq % 2 == 1 ? Collective::kAllGather : Collective::kBarrier;
      (*status)->OnEnter(seq, op);
      (*status)->OnLeave(seq, op, 0);
    }
    done = true;
  });
  std::string torn;  // the first inconsistent read, if any
  while (!done.load() && torn.empty()) {
    RankFigures r = (*status)->Snapshot();
    if (r.collective_seq == 0) continue;  // unknown (no consistent copy): allowed, never torn
    ++reads;
    const Collective want =
        r.collective_seq % 2 == 1 ? Collective::kAllGather : Collective::kBarrier;
    if (r.collective_op != want) {
      torn = absl::StrCat("seq ", r.collective_seq, " read with ", CollectiveName(r.collective_op));
    }
  }
  writer.join();  // before any assertion can return from the test
  EXPECT_EQ(torn, "");
  EXPECT_GT(reads, 0);
  std::filesystem::remove_all(dir);
}

TEST(RankStatusTest, MissingAndForeignFilesAreErrorsNamingThePath) {
  const std::string dir = TempDir();
  absl::StatusOr<RankFigures> r = ReadRankStatusFile(dir + "/absent.status");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "absent.status"));

  const std::string foreign = dir + "/foreign.status";
  std::ofstream(foreign) << "not a status block";
  r = ReadRankStatusFile(foreign);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "foreign.status"));

  // Right size, wrong magic.
  auto good = RankStatus::CreateFile(dir + "/good.status");
  ASSERT_TRUE(good.ok());
  const auto size = std::filesystem::file_size(dir + "/good.status");
  std::ofstream(foreign, std::ios::trunc) << std::string(size, 'x');
  r = ReadRankStatusFile(foreign);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not a ringmaster rank status block"));

  EXPECT_FALSE(RankStatus::CreateFile(dir + "/no/such/dir/x.status").ok());
  std::filesystem::remove_all(dir);
}

// The block only grows at its end: a block written by an older trainer (shorter by the fields
// added since, here the last two) is refused by size, never read with later fields missing.
TEST(RankStatusTest, AnOlderShorterBlockIsRefusedBySize) {
  const std::string dir = TempDir();
  const std::string path = dir + "/old.status";
  auto s = RankStatus::CreateFile(path);
  ASSERT_TRUE(s.ok());
  (*s)->OnStart(2, 10);
  s->reset();  // the writer's mapping gone before the file shrinks
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 2 * sizeof(uint64_t));
  absl::StatusOr<RankFigures> r = ReadRankStatusFile(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(r.status().message(), absl::StrCat("expected ", size)))
      << r.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster::trainer
