#include "trainer/train/best_model.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::trainer {

BestModelTracker::BestModelTracker(const TrainSpec& train)
    : metric_(BestModelMetricName(train.metric_for_best_model.empty() ? "eval_loss"
                                                                      : train.metric_for_best_model)
                  .value_or("eval_loss")),
      greater_(GreaterIsBetter(train)),
      patience_(train.early_stopping_patience),
      threshold_(train.early_stopping_threshold) {}

absl::StatusOr<double> BestModelTracker::ValueOf(const EvalResult& e) const {
  std::optional<double> v;
  if (metric_ == "eval_loss") v = e.loss;
  if (metric_ == "eval_accuracy") v = e.accuracy;
  if (metric_ == "eval_f1") v = e.f1;
  if (metric_ == "eval_matthews_correlation") v = e.matthews_correlation;
  if (metric_ == "eval_pearson") v = e.pearson;
  if (metric_ == "eval_spearmanr") v = e.spearmanr;
  if (!v) {
    return absl::FailedPreconditionError(absl::StrCat(
        "train.metric_for_best_model: the evaluation reported no ", metric_, " for this model"));
  }
  return *v;
}

absl::StatusOr<EvalVerdict> BestModelTracker::Judge(const EvalResult& e) const {
  absl::StatusOr<double> v = ValueOf(e);
  if (!v.ok()) return v.status();
  EvalVerdict out;
  if (best_step_ < 0) {
    out.best = out.resets_patience = true;
    return out;
  }
  out.best = greater_ ? *v > best_value_ : *v < best_value_;
  out.resets_patience = out.best && std::abs(*v - best_value_) > threshold_;
  return out;
}

absl::Status BestModelTracker::Apply(int64_t step, const EvalResult& e,
                                     const EvalVerdict& verdict) {
  absl::StatusOr<double> v = ValueOf(e);
  if (!v.ok()) return v.status();
  last_value_ = *v;
  without_improvement_ = verdict.resets_patience ? 0 : without_improvement_ + 1;
  if (verdict.best) {
    best_step_ = step;
    best_value_ = *v;
    best_eval_ = e;
  }
  return absl::OkStatus();
}

std::string BestModelTracker::StopReason() const {
  return absl::StrFormat(
      "%s %.4f has not improved on the best %.4f (step %d) by more than %g for %d evaluation(s) "
      "(train.early_stopping_patience %d)",
      metric_, last_value_, best_value_, best_step_, threshold_, without_improvement_, patience_);
}

nlohmann::json BestModelTracker::ToJson() const {
  nlohmann::json best = {{"loss", best_eval_.loss},
                         {"accuracy", best_eval_.accuracy},
                         {"examples", best_eval_.examples}};
  auto put = [&](const char* key, const std::optional<double>& v) {
    if (v) best[key] = *v;
  };
  put("f1", best_eval_.f1);
  put("matthews_correlation", best_eval_.matthews_correlation);
  put("pearson", best_eval_.pearson);
  put("spearmanr", best_eval_.spearmanr);
  return {{"metric", metric_},
          {"best_step", best_step_},
          {"best_value", best_value_},
          {"last_value", last_value_},
          {"evaluations_without_improvement", without_improvement_},
          {"best_eval", best}};
}

absl::Status BestModelTracker::FromJson(const nlohmann::json& j) {
  try {
    if (j.at("metric").get<std::string>() != metric_) {
      // Another ranking figure: the recorded best says nothing about this one; start afresh.
      return absl::OkStatus();
    }
    best_step_ = j.at("best_step").get<int64_t>();
    best_value_ = j.at("best_value").get<double>();
    last_value_ = j.at("last_value").get<double>();
    without_improvement_ = j.at("evaluations_without_improvement").get<int>();
    const nlohmann::json& b = j.at("best_eval");
    best_eval_ = EvalResult{};
    best_eval_.loss = b.at("loss").get<double>();
    best_eval_.accuracy = b.at("accuracy").get<double>();
    best_eval_.examples = b.at("examples").get<int64_t>();
    auto get = [&](const char* key, std::optional<double>* v) {
      if (b.contains(key)) *v = b.at(key).get<double>();
    };
    get("f1", &best_eval_.f1);
    get("matthews_correlation", &best_eval_.matthews_correlation);
    get("pearson", &best_eval_.pearson);
    get("spearmanr", &best_eval_.spearmanr);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("checkpoint's best-model record: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
