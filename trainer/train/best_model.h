// Ranking evaluations by train.metric_for_best_model, for keeping the best model
// (train.load_best_model_at_end) and early stopping (train.early_stopping_patience), with the
// rules of HF's Trainer and EarlyStoppingCallback:
//   - an evaluation is the best so far when its figure beats the best strictly (higher when
//     greater_is_better, else lower), by any amount;
//   - it resets the patience count only when it beats the best by more than
//     early_stopping_threshold; otherwise the count goes up, and training stops when the count
//     reaches early_stopping_patience.
// Judging and applying are separate so that ranks adopt one rank's verdict (the loop's
// EvaluateDuringTraining): every rank then holds the same state and stops at the same step.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/job_spec.h"
#include "trainer/train/eval_metrics.h"

namespace ringmaster::trainer {

struct EvalVerdict {
  bool best = false;             // the best evaluation so far
  bool resets_patience = false;  // better than the best by more than the threshold
};

class BestModelTracker {
 public:
  explicit BestModelTracker(const TrainSpec& train);

  // The metrics.jsonl name of the ranking figure: eval_loss unless metric_for_best_model says.
  const std::string& metric() const { return metric_; }
  bool greater_is_better() const { return greater_; }
  // The ranking figure of `e`; FailedPrecondition when the evaluation did not report it.
  absl::StatusOr<double> ValueOf(const EvalResult& e) const;

  // What evaluation `e` is worth against the state so far (changes nothing).
  absl::StatusOr<EvalVerdict> Judge(const EvalResult& e) const;
  // Records evaluation `e` of step `step` under `verdict` (from Judge, maybe another rank's).
  absl::Status Apply(int64_t step, const EvalResult& e, const EvalVerdict& verdict);

  // Whether early stopping says to stop now (patience > 0 and used up).
  bool ShouldStop() const { return patience_ > 0 && without_improvement_ >= patience_; }
  // "eval_accuracy 0.5000 has not improved on 0.6000 (step 12) by more than 0 for 3
  // evaluations": why ShouldStop.
  std::string StopReason() const;

  int64_t best_step() const { return best_step_; }  // -1: no evaluation yet
  double best_value() const { return best_value_; }
  const EvalResult& best_eval() const { return best_eval_; }
  int evaluations_without_improvement() const { return without_improvement_; }

  // The state, for a checkpoint's meta.extra, and back (a resumed run continues the count).
  nlohmann::json ToJson() const;
  absl::Status FromJson(const nlohmann::json& j);

 private:
  std::string metric_;
  bool greater_ = false;
  int patience_ = 0;
  double threshold_ = 0;
  int64_t best_step_ = -1;
  double best_value_ = 0;
  EvalResult best_eval_;
  double last_value_ = 0;
  int without_improvement_ = 0;
};

}  // namespace ringmaster::trainer
