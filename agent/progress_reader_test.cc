#include "agent/progress_reader.h"

#include <unistd.h>

#include <filesystem>

#include "common/file_util.h"
#include "common/rank_status.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;

class ProgressReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("progress_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "rank-0.status").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One training step as the trainer records it.
  static void Step(trainer::RankStatus& s, int64_t step, double loss) {
    trainer::StepFigures f;
    f.step = step;
    f.loss = loss;
    f.unix_time = 1'700'000'000 + static_cast<double>(step);
    s.OnStep(f, {});
  }

  fs::path dir_;
  std::string path_;
  const absl::Time t0_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(ProgressReaderTest, TheTotalIsTheSpecsMaxStepsUntilTheTrainerWritesItsPlan) {
  ProgressReader unknown(path_, 8, 0);
  EXPECT_EQ(unknown.Update(t0_).total_steps, 0);  // no block yet, no max_steps
  ProgressReader r(path_, 8, 12);
  JobProgress p = r.Update(t0_);
  EXPECT_EQ(p.total_steps, 12);
  EXPECT_EQ(p.step, 0);

  auto status = trainer::RankStatus::CreateFile(path_);
  ASSERT_TRUE(status.ok()) << status.status();
  (*status)->OnStart(2, 40);
  EXPECT_EQ(unknown.Update(t0_).total_steps, 40);
  p = r.Update(t0_);
  EXPECT_EQ(p.total_steps, 40);
  EXPECT_EQ(p.step, 0);  // planned, no step yet
  EXPECT_EQ(p.loss, 0);
}

TEST_F(ProgressReaderTest, StepLossAndDerivedRateFromTheBlock) {
  auto status = trainer::RankStatus::CreateFile(path_);
  ASSERT_TRUE(status.ok()) << status.status();
  (*status)->OnStart(2, 40);
  Step(**status, 2, 1.5);
  ProgressReader r(path_, 8, 0);
  JobProgress p = r.Update(t0_);
  EXPECT_EQ(p.step, 2);
  EXPECT_EQ(p.total_steps, 40);
  EXPECT_DOUBLE_EQ(p.loss, 1.5);
  EXPECT_EQ(p.samples_per_second, 0);  // one observation: no rate yet
  Step(**status, 7, 0.5);
  p = r.Update(t0_ + absl::Seconds(10));
  EXPECT_EQ(p.step, 7);
  EXPECT_DOUBLE_EQ(p.loss, 0.5);
  EXPECT_DOUBLE_EQ(p.samples_per_second, 5.0 * 8 / 10);
}

// A restarted rank: the agent removes the block, the new trainer creates one and resumes from
// its checkpoint. Until it has stepped, the figures read last stay.
TEST_F(ProgressReaderTest, KeepsTheLastFiguresWhileARestartedTrainerHasNotStepped) {
  ProgressReader r(path_, 8, 0);
  {
    auto status = trainer::RankStatus::CreateFile(path_);
    ASSERT_TRUE(status.ok()) << status.status();
    (*status)->OnStart(2, 40);
    Step(**status, 9, 0.75);
    EXPECT_EQ(r.Update(t0_).step, 9);
  }
  fs::remove(path_);
  JobProgress p = r.Update(t0_ + absl::Seconds(1));
  EXPECT_EQ(p.step, 9);
  EXPECT_DOUBLE_EQ(p.loss, 0.75);
  EXPECT_EQ(p.total_steps, 40);

  ASSERT_TRUE(WriteFileAtomic(path_, "not a status block").ok());
  EXPECT_EQ(r.Update(t0_ + absl::Seconds(2)).step, 9);

  auto status = trainer::RankStatus::CreateFile(path_);
  ASSERT_TRUE(status.ok()) << status.status();
  (*status)->OnStart(2, 40);
  EXPECT_EQ(r.Update(t0_ + absl::Seconds(3)).step, 9);
  Step(**status, 8, 0.5);  // resumed from the checkpoint of step 7
  p = r.Update(t0_ + absl::Seconds(4));
  EXPECT_EQ(p.step, 8);
  EXPECT_DOUBLE_EQ(p.loss, 0.5);
}

}  // namespace
}  // namespace ringmaster::agent
