// The training loop's evaluation: EvaluateAll (split over the ranks), when train.eval_strategy
// evaluates, ranking evaluations for the best model and early stopping (best_model.h), loading
// the best model at the end, and the figures' metrics.jsonl keys and log text. Part of
// TrainLoop (train_loop.h); the other train_loop*.cc files hold the rest.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/train/eval_metrics.h"
#include "trainer/train/sharded_checkpoint.h"
#include "trainer/train/train_loop.h"

namespace ringmaster::trainer {

void AddEvalFigures(const EvalResult& e, nlohmann::json* line) {
  if (e.f1) (*line)["eval_f1"] = *e.f1;
  if (e.matthews_correlation) (*line)["eval_matthews_correlation"] = *e.matthews_correlation;
  if (e.pearson) (*line)["eval_pearson"] = *e.pearson;
  if (e.spearmanr) (*line)["eval_spearmanr"] = *e.spearmanr;
}

std::string EvalFiguresText(const EvalResult& e) {
  std::vector<std::string> parts;
  if (e.f1) parts.push_back(absl::StrFormat("f1 %.4f", *e.f1));
  if (e.matthews_correlation) {
    parts.push_back(absl::StrFormat("matthews_correlation %.4f", *e.matthews_correlation));
  }
  if (e.pearson) parts.push_back(absl::StrFormat("pearson %.4f", *e.pearson));
  if (e.spearmanr) parts.push_back(absl::StrFormat("spearmanr %.4f", *e.spearmanr));
  return parts.empty() ? "" : absl::StrCat("; ", absl::StrJoin(parts, ", "));
}

absl::StatusOr<EvalResult> TrainLoop::EvaluateAll() {
  // Rank r evaluates a contiguous share; every rank runs the same number of forwards (empty
  // ones included) because an engine may communicate inside each (full_shard gathers
  // parameters).
  const std::vector<EncodedExample>& eval = data_.eval;
  const size_t n = eval.size(), w = static_cast<size_t>(world_.world_size);
  const size_t r = static_cast<size_t>(world_.rank);
  const size_t b = n * r / w, e = n * (r + 1) / w;
  const size_t bs = static_cast<size_t>(job_.train.eval_batch_size);
  const size_t passes = ((n + w - 1) / w + bs - 1) / bs;
  const int C = data_.num_labels;
  double loss_sum = 0;
  double correct = 0;
  // Summed over the ranks with the loss: the confusion matrix (classification), or every
  // prediction and label at its row (regression: Spearman needs them all).
  const size_t C2 = static_cast<size_t>(C) * static_cast<size_t>(C);
  std::vector<float> figures(C > 1 ? C2 : 2 * n, 0.0f);
  for (size_t k = 0; k < passes; ++k) {
    const size_t lo = std::min(e, b + k * bs), hi = std::min(e, lo + bs);
    if (lo == hi) {
      engine_->EmptyEvalForward();
      continue;
    }
    std::vector<int64_t> idx;
    for (size_t i = lo; i < hi; ++i) idx.push_back(static_cast<int64_t>(i));
    Batch batch = MakeBatch(eval, idx, data_.pad_id);
    RM_ASSIGN_OR_RETURN(ForwardOutput out, engine_->EvalForward(batch));
    loss_sum += static_cast<double>(out.loss) * batch.batch_size;
    for (int i = 0; i < batch.batch_size; ++i) {
      const float* row = out.logits.data() + static_cast<size_t>(i) * C;
      if (C > 1 && static_cast<int>(std::max_element(row, row + C) - row) ==
                       static_cast<int>(batch.labels[i])) {
        ++correct;
      }
      if (C > 1) {
        const size_t pred = static_cast<size_t>(std::max_element(row, row + C) - row);
        figures[static_cast<size_t>(batch.labels[i]) * C + pred] += 1.0f;
      } else {
        figures[lo + i] = row[0];
        figures[n + lo + i] = batch.labels[i];
      }
    }
  }
  RM_RETURN_IF_ERROR(engine_->status());
  std::vector<float> sums = {static_cast<float>(loss_sum), static_cast<float>(correct)};
  sums.insert(sums.end(), figures.begin(), figures.end());
  RM_RETURN_IF_ERROR(engine_->AllReduceSum(&sums));
  EvalResult res;
  res.examples = static_cast<int64_t>(n);
  if (n > 0) {
    res.loss = sums[0] / static_cast<double>(n);
    res.accuracy = sums[1] / static_cast<double>(n);
    if (C > 1) {
      const ClassificationMetrics cm =
          ClassificationMetricsOf(std::vector<double>(sums.begin() + 2, sums.begin() + 2 + C2), C);
      res.f1 = cm.f1;
      res.matthews_correlation = cm.matthews_correlation;
    } else {
      const RegressionMetrics rm =
          RegressionMetricsOf(std::vector<double>(sums.begin() + 2, sums.begin() + 2 + n),
                              std::vector<double>(sums.begin() + 2 + n, sums.end()));
      res.pearson = rm.pearson;
      res.spearmanr = rm.spearmanr;
    }
  }
  return res;
}

bool TrainLoop::EvaluatesNow(bool epoch_end) const {
  switch (job_.train.eval_strategy) {
    case EvalStrategy::kEpoch:
      return epoch_end;
    case EvalStrategy::kSteps:
      return job_.train.eval_steps > 0 && step_ % job_.train.eval_steps == 0;
    case EvalStrategy::kNo:
      return false;
  }
  return false;
}

absl::Status TrainLoop::EvaluateAndRank(double epoch, bool record, TrainResult* result,
                                        bool* is_best) {
  RM_ASSIGN_OR_RETURN(result->eval, EvaluateAll());
  result->eval_step = step_;
  metrics_->OnEval(result->eval.loss, result->eval.accuracy);
  // The figures are sums every rank received from one all-reduce, but rank 0 alone judges and
  // every rank adopts its verdict: ranks cannot disagree on the best step or on stopping.
  RM_ASSIGN_OR_RETURN(const EvalVerdict mine, best_.Judge(result->eval));
  std::vector<float> verdict = {leader() && mine.best ? 1.0f : 0.0f,
                                leader() && mine.resets_patience ? 1.0f : 0.0f};
  RM_RETURN_IF_ERROR(engine_->AllReduceSum(&verdict));
  const EvalVerdict agreed{verdict[0] > 0, verdict[1] > 0};
  RM_RETURN_IF_ERROR(best_.Apply(step_, result->eval, agreed));
  *is_best = agreed.best;
  if (!record) return absl::OkStatus();
  nlohmann::json line = {{"step", step_},
                         {"epoch", epoch},
                         {"eval_loss", result->eval.loss},
                         {"eval_accuracy", result->eval.accuracy}};
  AddEvalFigures(result->eval, &line);
  return AppendMetrics(line);
}

absl::Status TrainLoop::LoadBestModel(TrainResult* result) {
  const int64_t best = best_.best_step();
  if (best < 0) return absl::OkStatus();  // nothing evaluated: the last weights it is
  result->eval = best_.best_eval();
  result->eval.examples = static_cast<int64_t>(data_.eval.size());
  result->eval_step = best;
  result->best_model = true;
  if (best != step_) {
    // The best checkpoint survived pruning (Checkpoint protects it).
    const std::string dir = ShardedCheckpointDir(job_.output.dir, best);
    absl::StatusOr<LoadedShard> d = engine_->ReadCheckpoint(dir);
    if (!d.ok()) {
      return absl::Status(d.status().code(),
                          absl::StrCat("train.load_best_model_at_end: cannot read the best "
                                       "model's checkpoint: ",
                                       d.status().message()));
    }
    RM_RETURN_IF_ERROR(engine_->LoadCheckpoint(*d));
  }
  if (leader()) {
    LogInfo(absl::StrFormat(
        "train.load_best_model_at_end: exporting the best model, step %d of %d (%s %.4f; eval "
        "loss %.4f accuracy %.4f)",
        best, step_, best_.metric(), best_.best_value(), result->eval.loss, result->eval.accuracy));
    RM_RETURN_IF_ERROR(AppendMetrics({{"step", step_},
                                      {"best_model_step", best},
                                      {"metric_for_best_model", best_.metric()},
                                      {"best_metric", best_.best_value()}}));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
