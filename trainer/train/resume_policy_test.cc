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
        "distributed.compression", "distributed.bucket_cap_mb", "output.dir", "train.resume",
        "data.eval", "name"}) {
    EXPECT_FALSE(s.contains(left_out)) << left_out;
  }
  JobSpec b = a;
  b.train.micro_batch_size = 1;
  b.train.precision = Precision::kBf16;
  b.distributed.sharding = Sharding::kFullShard;
  b.distributed.compression = Compression::kPowerSgd;
  b.distributed.bucket_cap_mb = 25;  // the summation order of no_shard's all-reduces
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

// Keys added after checkpoints existed: absent at their defaults (old checkpoints resume), and
// each change that matters is named.
TEST(ResumePolicyTest, ScheduleDataAndBestModelKeys) {
  const JobSpec a = SomeJob();
  const RunSettings s = TrajectorySettings(a);
  for (const char* absent :
       {"train.lr_end", "train.lr_power", "data.format", "data.text_column", "data.label_column",
        "data.text_pair_column", "data.labels", "train.eval_strategy", "train.eval_steps",
        "train.metric_for_best_model", "train.early_stopping_patience",
        "train.load_best_model_at_end"}) {
    EXPECT_FALSE(s.contains(absent)) << absent;
  }
  JobSpec b = a;
  b.train.lr_end = 1e-6;  // ignored by linear
  b.train.eval_strategy = EvalStrategy::kSteps;
  b.train.eval_steps = 5;  // evaluations alone change nothing trained
  EXPECT_TRUE(DiffSettings(s, TrajectorySettings(b)).empty());
  b.train.lr_schedule = LrScheduleKind::kPolynomial;
  b.data.format = DataFormat::kCsv;
  b.data.text_column = "review";
  b.data.label_column = "stars";
  b.data.text_pair_column = "hypothesis";
  b.data.labels = {"neg", "pos"};
  b.train.early_stopping_patience = 2;
  EXPECT_EQ(FormatChanges(DiffSettings(s, TrajectorySettings(b))),
            "data.format (not set) -> csv, data.label_column (not set) -> stars, data.labels "
            "(not set) -> [neg, pos], data.text_column (not set) -> review, "
            "data.text_pair_column (not set) -> hypothesis, train.early_stopping_patience (not "
            "set) -> 2, train.early_stopping_threshold (not set) -> 0, train.eval_steps (not "
            "set) -> 5, train.eval_strategy (not set) -> steps, train.greater_is_better (not "
            "set) -> false, train.lr_end (not set) -> 1e-06, train.lr_power (not set) -> 1, "
            "train.lr_schedule linear -> polynomial, train.metric_for_best_model (not set) -> "
            "eval_loss");
  JobSpec c = b;
  c.train.metric_for_best_model = "accuracy";  // the same figure as eval_accuracy
  JobSpec d = b;
  d.train.metric_for_best_model = "eval_accuracy";
  d.train.load_best_model_at_end = true;
  EXPECT_EQ(FormatChanges(DiffSettings(TrajectorySettings(c), TrajectorySettings(d))),
            "train.load_best_model_at_end (not set) -> true");
  EXPECT_EQ(TrajectorySettings(c).at("train.greater_is_better"), "true");
}

// The tokenizer mode changes every id the model sees: a change is named, the default is absent
// (checkpoints from before the key resume), with init_from as with config.
TEST(ResumePolicyTest, TokenizerCompatIsRecordedWhenNotTheDefault) {
  const JobSpec a = SomeJob();
  EXPECT_FALSE(TrajectorySettings(a).contains("model.tokenizer_compat"));
  JobSpec b = a;
  b.model.tokenizer_compat = TokenizerCompat::kFast;
  EXPECT_EQ(FormatChanges(DiffSettings(TrajectorySettings(a), TrajectorySettings(b))),
            "model.tokenizer_compat (not set) -> fast");
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
