// ctest-labels: unit
// The trajectory settings a checkpoint records and how two sets are compared.
#include "trainer/train/resume_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

JobSpec SomeJob() {
  JobSpec job;
  job.model.init_from = "/models/bert";
  job.data.train = "/nonexistent/train.tsv";
  job.train.lr = 3e-5;
  return job;
}

TEST(ResumePolicyTest, RecordsWhatChangesTheTrajectoryAndNotHowABatchIsComputed) {
  const JobSpec a = SomeJob();
  const RunSettings s = TrajectorySettings(a);
  EXPECT_EQ(s.at("train.lr"), "3e-05");
  EXPECT_EQ(s.at("model.init_from"), "/models/bert");
  EXPECT_EQ(s.at("data.train"), "/nonexistent/train.tsv (unreadable)");
  EXPECT_EQ(s.at("train.epochs"), "3");
  EXPECT_FALSE(s.contains("train.max_steps"));  // epochs are in force
  for (const char* left_out :
       {"train.micro_batch_size", "train.precision", "train.device", "distributed.sharding",
        "distributed.compression", "output.dir", "train.resume", "data.eval", "name"}) {
    EXPECT_FALSE(s.contains(left_out)) << left_out;
  }
  JobSpec b = a;
  b.train.micro_batch_size = 1;
  b.train.precision = Precision::kBf16;
  b.distributed.sharding = Sharding::kFullShard;
  b.distributed.compression = Compression::kPowerSgd;
  b.output.dir = "/elsewhere";
  b.train.resume = ResumeMode::kForce;
  EXPECT_TRUE(DiffSettings(s, TrajectorySettings(b)).empty());
  b.train.seed = 43;
  b.train.adam_beta2 = 0.98;
  EXPECT_EQ(FormatChanges(DiffSettings(s, TrajectorySettings(b))),
            "train.adam_betas [0.9, 0.999] -> [0.9, 0.98], train.seed 42 -> 43");
}

TEST(ResumePolicyTest, KeysOnOneSideOnlyAreChangesToo) {
  JobSpec a = SomeJob();
  JobSpec b = a;
  b.train.max_steps = 100;  // max_steps now decides the length, not epochs
  const std::vector<SettingChange> d = DiffSettings(TrajectorySettings(a), TrajectorySettings(b));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(FormatChanges(d), "train.epochs 3 -> (not set), train.max_steps (not set) -> 100");
}

TEST(ResumePolicyTest, TheRefusalIsOneMarkedLineNamingTheWaysOut) {
  const absl::Status s =
      SettingsChanged("/out/checkpoints/step-00000150", {{"train.lr", "0.001", "0.002"}});
  EXPECT_TRUE(IsSettingsChanged(s));
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos);
  EXPECT_THAT(s.message(), HasSubstr("step-00000150 was written by a run with other settings "
                                     "(checkpoint -> this job): train.lr 0.001 -> 0.002."));
  EXPECT_THAT(s.message(), HasSubstr("train.resume: never (or pass --overwrite)"));
  EXPECT_THAT(s.message(), HasSubstr("train.resume: force (or pass --resume)"));
}

}  // namespace
}  // namespace ringmaster::trainer
