#include "agent/progress_reader.h"

#include <filesystem>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

TEST(ProgressReader, LastCompleteMetricsLine) {
  EXPECT_FALSE(ParseLastMetricsLine("").has_value());
  EXPECT_FALSE(ParseLastMetricsLine("{\"step\":1").has_value());
  std::optional<MetricsLine> m = ParseLastMetricsLine(
      "p\":1}\n{\"step\":4,\"loss\":0.5}\n{\"step\":5,\"epoch\":0,\"loss\":0.25}\n"
      "{\"step\":5,\"eval_loss\":0.7,\"eval_accuracy\":0.5}\n{\"step\":6,");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->step, 5);
  EXPECT_DOUBLE_EQ(m->loss, 0.25);
}

TEST(ProgressReader, TotalStepsFromTheTrainerLog) {
  EXPECT_EQ(ParseTotalSteps("x INFO t: training j: 9 epochs, total 27 steps\n"), 27);
  EXPECT_FALSE(ParseTotalSteps("x INFO t: nothing").has_value());
}

TEST(ProgressReader, DerivesRateAndIgnoresOlderFiles) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("progress_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string metrics = (dir / "metrics.jsonl").string();
  const std::string log = (dir / "rank-0.log").string();
  ASSERT_TRUE(WriteFileAtomic(metrics, "{\"step\":2,\"loss\":1.5}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(log, "a INFO b: training x, total 40 steps\n").ok());
  // A generation that started long after the file was written: the file is the last run's.
  ProgressReader stale(metrics, log, 8, 0, absl::Now() + absl::Hours(1));
  JobProgress p = stale.Update(absl::Now());
  EXPECT_EQ(p.step, 0);
  EXPECT_EQ(p.total_steps, 40);

  const absl::Time t0 = absl::Now() - absl::Minutes(1);
  ProgressReader r(metrics, log, 8, 12, t0);
  p = r.Update(t0);
  EXPECT_EQ(p.step, 2);
  EXPECT_EQ(p.total_steps, 12);  // max_steps wins
  EXPECT_DOUBLE_EQ(p.loss, 1.5);
  EXPECT_EQ(p.samples_per_second, 0);
  ASSERT_TRUE(WriteFileAtomic(metrics, "{\"step\":2}\n{\"step\":7,\"loss\":0.5}\n").ok());
  p = r.Update(t0 + absl::Seconds(10));
  EXPECT_EQ(p.step, 7);
  EXPECT_DOUBLE_EQ(p.samples_per_second, 5.0 * 8 / 10);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster::agent
