// ctest-labels: unit
// Ranking evaluations as HF's Trainer and EarlyStoppingCallback do.
#include "trainer/train/best_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace ringmaster::trainer {
namespace {

EvalResult Eval(double loss, double accuracy) {
  EvalResult e;
  e.loss = loss;
  e.accuracy = accuracy;
  e.examples = 10;
  return e;
}

// Feeds `values` as evaluations at steps 10, 20, ... and returns the step training stops at
// (0: never).
int64_t StopStep(BestModelTracker& t, const std::vector<EvalResult>& evals) {
  for (size_t i = 0; i < evals.size(); ++i) {
    const int64_t step = 10 * static_cast<int64_t>(i + 1);
    absl::StatusOr<EvalVerdict> v = t.Judge(evals[i]);
    EXPECT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(t.Apply(step, evals[i], *v).ok());
    if (t.ShouldStop()) return step;
  }
  return 0;
}

TEST(BestModelTest, LossIsMinimisedOtherFiguresMaximised) {
  TrainSpec loss;
  EXPECT_FALSE(GreaterIsBetter(loss));
  TrainSpec acc;
  acc.metric_for_best_model = "accuracy";
  EXPECT_TRUE(GreaterIsBetter(acc));
  acc.greater_is_better = false;  // the override wins
  EXPECT_FALSE(GreaterIsBetter(acc));
  EXPECT_EQ(BestModelMetricName("accuracy").value_or(""), "eval_accuracy");
  EXPECT_EQ(BestModelMetricName("eval_f1").value_or(""), "eval_f1");
  EXPECT_FALSE(BestModelMetricName("bleu").has_value());

  BestModelTracker t(loss);
  EXPECT_EQ(t.metric(), "eval_loss");
  EXPECT_EQ(StopStep(t, {Eval(0.9, 0), Eval(0.5, 0), Eval(0.7, 0), Eval(0.4, 0)}), 0);
  EXPECT_EQ(t.best_step(), 40);
  EXPECT_EQ(t.best_value(), 0.4);
}

TEST(BestModelTest, PatienceCountsEvaluationsWithoutImprovementBeyondTheThreshold) {
  TrainSpec s;
  s.metric_for_best_model = "eval_accuracy";
  s.early_stopping_patience = 2;
  s.early_stopping_threshold = 0.05;
  BestModelTracker t(s);
  // 0.60 best; 0.62 is better (the new best) but not by more than 0.05: count 1; 0.61: count 2.
  EXPECT_EQ(StopStep(t, {Eval(1, 0.5), Eval(1, 0.6), Eval(1, 0.62), Eval(1, 0.61), Eval(1, 0.9)}),
            40);
  EXPECT_EQ(t.best_step(), 30);
  EXPECT_EQ(t.best_eval().accuracy, 0.62);
  EXPECT_EQ(t.evaluations_without_improvement(), 2);
  EXPECT_NE(t.StopReason().find("eval_accuracy 0.6100 has not improved on the best 0.6200 "
                                "(step 30) by more than 0.05 for 2 evaluation(s)"),
            std::string::npos)
      << t.StopReason();

  // The state travels through a checkpoint: a resumed tracker stops where this one would.
  BestModelTracker u(s);
  BestModelTracker v(s);
  EXPECT_EQ(StopStep(u, {Eval(1, 0.5), Eval(1, 0.7), Eval(1, 0.69)}), 0);
  ASSERT_TRUE(v.FromJson(u.ToJson()).ok());
  EXPECT_EQ(v.best_step(), 20);
  EXPECT_EQ(v.evaluations_without_improvement(), 1);
  absl::StatusOr<EvalVerdict> verdict = v.Judge(Eval(1, 0.71));
  ASSERT_TRUE(verdict.ok());
  EXPECT_TRUE(verdict->best);
  EXPECT_FALSE(verdict->resets_patience);
  ASSERT_TRUE(v.Apply(40, Eval(1, 0.71), *verdict).ok());
  EXPECT_TRUE(v.ShouldStop());
}

TEST(BestModelTest, AFigureTheEvaluationLacksIsAnError) {
  TrainSpec s;
  s.metric_for_best_model = "f1";
  BestModelTracker t(s);
  EXPECT_EQ(t.Judge(Eval(1, 0.5)).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster::trainer
