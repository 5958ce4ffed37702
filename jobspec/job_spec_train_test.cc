// ctest-labels: unit
// The job spec's data layout keys, LR schedule keys and the evaluation / best model / early
// stopping keys and the gradient checkpointing switch: parsed, checked with errors naming the
// key, written back.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec.h"
#include "jobspec/job_spec_test_util.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;
using testing_util::ErrorOf;
using testing_util::Parse;

// The data file layout keys: parsed, checked and written back.
std::string WithData(const std::string& data_keys) {
  return absl::StrCat("model:\n  init_from: models/bert\ndata:\n  train: train.csv\n", data_keys,
                      "output:\n  dir: out\n");
}

TEST(JobSpecTest, DataFormatAndColumns) {
  absl::StatusOr<JobSpec> d = Parse(WithData(""));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->data.format, DataFormat::kAuto);
  EXPECT_EQ(d->data.text_column, "sentence");
  EXPECT_EQ(d->data.label_column, "label");
  absl::StatusOr<JobSpec> s =
      Parse(WithData("  format: jsonl\n  text_column: review\n  label_column: stars\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->data.format, DataFormat::kJsonl);
  EXPECT_EQ(s->data.text_column, "review");
  EXPECT_EQ(s->data.label_column, "stars");
  absl::StatusOr<JobSpec> back = Parse(JobSpecToYaml(*s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobSpecToYaml(*back), JobSpecToYaml(*s));
  EXPECT_EQ(back->data.format, DataFormat::kJsonl);

  absl::StatusOr<JobSpec> named = Parse(WithData("  labels: [negative, positive]\n"));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_THAT(named->data.labels, ::testing::ElementsAre("negative", "positive"));
  absl::StatusOr<JobSpec> named_back = Parse(JobSpecToYaml(*named));
  ASSERT_TRUE(named_back.ok()) << named_back.status();
  EXPECT_EQ(named_back->data.labels, named->data.labels);
  EXPECT_THAT(ErrorOf(WithData("  labels: [a, b, c]\n")),
              HasSubstr("data.labels: has 3 names but model.num_labels is 2"));
  EXPECT_THAT(ErrorOf(WithData("  labels: [a, a]\n")), HasSubstr("'a' is listed twice"));
  EXPECT_THAT(ErrorOf(WithData("  labels: a\n")), HasSubstr("expected a list of strings"));
  EXPECT_THAT(ErrorOf(WithData("  format: xlsx\n")),
              HasSubstr("data.format: 'xlsx' is not one of: auto, tsv, csv, jsonl"));
  EXPECT_THAT(ErrorOf(WithData("  text_column: ''\n")), HasSubstr("data.text_column"));
  EXPECT_THAT(ErrorOf(WithData("  text_column: y\n  label_column: y\n")),
              HasSubstr("data.label_column: names the same column as data.text_column ('y')"));
}

// The schedules and the polynomial decay's keys: parsed, checked, written back.
TEST(JobSpecTest, LrScheduleKeys) {
  absl::StatusOr<JobSpec> d = Parse(WithData(""));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.lr_end, 1e-7);  // HF's defaults
  EXPECT_EQ(d->train.lr_power, 1.0);
  absl::StatusOr<JobSpec> c = Parse(WithData("train:\n  lr_schedule: cosine\n"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->train.lr_schedule, LrScheduleKind::kCosine);
  absl::StatusOr<JobSpec> p =
      Parse(WithData("train:\n  lr: 1e-3\n  lr_schedule: polynomial\n  lr_end: 1.5e-6\n  lr_power: "
                     "2.5\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->train.lr_schedule, LrScheduleKind::kPolynomial);
  EXPECT_EQ(p->train.lr_end, 1.5e-6);
  EXPECT_EQ(p->train.lr_power, 2.5);
  absl::StatusOr<JobSpec> back = Parse(JobSpecToYaml(*p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->train.lr_schedule, LrScheduleKind::kPolynomial);
  EXPECT_EQ(back->train.lr_end, 1.5e-6);
  EXPECT_EQ(back->train.lr_power, 2.5);
  EXPECT_THAT(ErrorOf(WithData("train:\n  lr_end: -1e-7\n")),
              HasSubstr("train.lr_end: must be >= 0, got -1e-07"));
  EXPECT_THAT(ErrorOf(WithData("train:\n  lr: 1e-5\n  lr_schedule: polynomial\n  lr_end: 1e-5\n")),
              HasSubstr("train.lr_end: must be below train.lr (1e-05) for lr_schedule polynomial"));
  // Only polynomial decays to lr_end: another schedule does not care.
  EXPECT_TRUE(Parse(WithData("train:\n  lr: 1e-5\n  lr_end: 1e-5\n")).ok());
  EXPECT_THAT(ErrorOf(WithData("train:\n  lr_power: 0\n")),
              HasSubstr("train.lr_power: must be > 0, got 0"));
  EXPECT_THAT(ErrorOf(WithData("train:\n  lr_power: fast\n")), HasSubstr("train.lr_power"));
}

// Evaluation during training, the best model and early stopping: parsed, checked, written back.
TEST(JobSpecTest, EvaluationAndBestModelKeys) {
  const std::string eval = "  eval: dev.csv\n";
  absl::StatusOr<JobSpec> d = Parse(WithData(eval));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.eval_strategy, EvalStrategy::kEpoch);  // today's behaviour
  EXPECT_EQ(d->train.eval_steps, 0);
  EXPECT_EQ(d->train.metric_for_best_model, "");
  EXPECT_FALSE(d->train.greater_is_better.has_value());
  EXPECT_FALSE(d->train.load_best_model_at_end);
  EXPECT_EQ(d->train.early_stopping_patience, 0);
  EXPECT_EQ(d->train.early_stopping_threshold, 0.0);
  absl::StatusOr<JobSpec> s =
      Parse(WithData(
          eval + "train:\n  eval_strategy: steps\n  eval_steps: 50\n  metric_for_best_model: f1\n"
                 "  greater_is_better: false\n  load_best_model_at_end: true\n"
                 "  early_stopping_patience: 3\n  early_stopping_threshold: 0.01\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->train.eval_strategy, EvalStrategy::kSteps);
  EXPECT_EQ(s->train.eval_steps, 50);
  EXPECT_EQ(s->train.metric_for_best_model, "f1");
  ASSERT_TRUE(s->train.greater_is_better.has_value());
  EXPECT_FALSE(*s->train.greater_is_better);
  EXPECT_TRUE(s->train.load_best_model_at_end);
  EXPECT_EQ(s->train.early_stopping_patience, 3);
  EXPECT_EQ(s->train.early_stopping_threshold, 0.01);
  absl::StatusOr<JobSpec> back = Parse(JobSpecToYaml(*s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobSpecToYaml(*back), JobSpecToYaml(*s));
  EXPECT_EQ(back->train.greater_is_better, s->train.greater_is_better);
  EXPECT_EQ(back->train.eval_strategy, EvalStrategy::kSteps);
  // `no` is a name here, not YAML's boolean.
  absl::StatusOr<JobSpec> no = Parse(WithData(eval + "train:\n  eval_strategy: no\n"));
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_EQ(no->train.eval_strategy, EvalStrategy::kNo);

  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  eval_strategy: always\n")),
              HasSubstr("train.eval_strategy: 'always' is not one of: epoch, steps, no"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  eval_strategy: steps\n")),
              HasSubstr("train.eval_steps: must be >= 1 with train.eval_strategy steps"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  eval_steps: -2\n")),
              HasSubstr("train.eval_steps: must be >= 0, got -2"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  metric_for_best_model: bleu\n")),
              HasSubstr("train.metric_for_best_model: 'bleu' is not a figure evaluation reports"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  metric_for_best_model: pearson\n")),
              HasSubstr("train.metric_for_best_model: 'pearson' is a regression figure"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  greater_is_better: maybe\n")),
              HasSubstr("train.greater_is_better"));
  EXPECT_THAT(ErrorOf(WithData("train:\n  load_best_model_at_end: true\n")),
              HasSubstr("train.load_best_model_at_end: needs evaluation data (data.eval)"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  eval_strategy: no\n  early_stopping_patience: "
                                      "2\n")),
              HasSubstr("train.early_stopping_patience: needs evaluations during training"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  early_stopping_patience: -1\n")),
              HasSubstr("train.early_stopping_patience: must be >= 0"));
  EXPECT_THAT(ErrorOf(WithData(eval + "train:\n  early_stopping_threshold: -0.1\n")),
              HasSubstr("train.early_stopping_threshold: must be >= 0, got -0.1"));
}

// train.gradient_checkpointing: off by default, parsed, written back, a non-boolean refused.
TEST(JobSpecTest, GradientCheckpointingKey) {
  absl::StatusOr<JobSpec> d = Parse(WithData(""));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->train.gradient_checkpointing);
  absl::StatusOr<JobSpec> on = Parse(WithData("train:\n  gradient_checkpointing: true\n"));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->train.gradient_checkpointing);
  absl::StatusOr<JobSpec> back = Parse(JobSpecToYaml(*on));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->train.gradient_checkpointing);
  absl::StatusOr<JobSpec> off = Parse(JobSpecToYaml(*d));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->train.gradient_checkpointing);
  EXPECT_THAT(ErrorOf(WithData("train:\n  gradient_checkpointing: sometimes\n")),
              HasSubstr("train.gradient_checkpointing"));
}

}  // namespace
}  // namespace ringmaster::trainer
