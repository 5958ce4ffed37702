// The training loop, independent of the model and the device: the plan (epochs of global
// batches, each rank's share of every global batch as `accumulation` micro-batches), the
// learning-rate schedule, metrics and progress, evaluation (after every epoch or every N steps,
// train.eval_strategy) with the best model and early stopping (train_loop_eval.cc), sharded
// checkpoints and resume (the engine writes its state, the loop the position), stopping on
// request (SIGTERM) with a checkpoint, divergence detection, and the final export. It drives a
// StepEngine (step_engine.h), which holds the model and does the computing.
//
// Every rank runs its own TrainLoop with the same job; they stay in step because they make the
// same sequence of engine calls (empty micro-batches and evaluation passes included).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trainer_metrics.h"
#include "jobspec/job_spec.h"
#include "trainer/data/batcher.h"
#include "trainer/data/tsv_row_index.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/train/best_model.h"
#include "trainer/train/eval_metrics.h"
#include "trainer/train/resume_policy.h"
#include "trainer/train/step_engine.h"
#include "trainer/train/tensorboard_writer.h"

namespace ringmaster::trainer {

// The figures of `e` that apply, as metrics.jsonl keys (eval_f1, eval_matthews_correlation,
// eval_pearson, eval_spearmanr, as the HF Trainer names them) added to `line`.
void AddEvalFigures(const EvalResult& e, nlohmann::json* line);
// The same for a log line: "; f1 0.8000, matthews_correlation 0.6000"; empty when none apply.
std::string EvalFiguresText(const EvalResult& e);

// Where the run's TensorBoard events go: output.tensorboard_dir, or by default <output.dir>/runs.
std::string TensorBoardDir(const JobSpec& job);
// A metrics.jsonl line's figures under the tags the HF Trainer gives them in TensorBoard:
// eval_<x> is eval/<x>, lr is train/learning_rate, any other number <x> is train/<x>; "step",
// an evaluation line's "epoch" (its step's line has it) and non-numbers (skipped: true) are left
// out.
std::vector<ScalarValue> TensorBoardScalars(const nlohmann::json& line);

// A failure because training diverged (the loss or the gradient norm became NaN or inf), as
// opposed to a broken peer or file: the same data and weights would diverge again, so a
// supervisor must not restart it. `ringmaster-trainer train` exits kExitDiverged for it.
absl::Status Diverged(const std::string& message);
bool IsDiverged(const absl::Status& status);
inline constexpr int kExitDiverged = 4;

struct TrainResult {
  int64_t steps = 0;
  // Of the final weights, the ones exported: the last epoch's evaluation when training ended at
  // an epoch end, else one run after the last step. examples == 0 without eval data; when
  // interrupted, the last evaluation before the stop, if any.
  EvalResult eval;
  // The step `eval` was taken at: == steps when not interrupted, else (load_best_model_at_end)
  // the best evaluation's step, whose weights were exported.
  int64_t eval_step = 0;
  bool best_model = false;  // final/ holds the best evaluation's weights (load_best_model_at_end)
  bool early_stopped = false;  // early stopping ended training before the planned last step
  std::string export_dir;
  bool interrupted = false;  // stopped by a signal after checkpointing
  // The newest checkpoint is of the last step and final/ holds its export: nothing was trained.
  // `eval` is then the last evaluation metrics.jsonl recorded (examples == 0: none).
  bool already_finished = false;
};

// This rank's place among the ranks, as far as the plan is concerned.
struct LoopWorld {
  int rank = 0;
  int world_size = 1;
  std::vector<double> rank_weights;  // RINGMASTER_RANK_WEIGHTS; empty: equal shares
  int restart_count = 0;             // TORCHELASTIC_RESTART_COUNT: 0 on a job's first attempt
};

// Rank `rank`'s slice [first, second) of a global batch of n samples: equal shares, or
// proportional to the rank weights.
std::pair<size_t, size_t> SliceOf(const LoopWorld& world, size_t n, int rank);

struct TrainPlan {
  int accumulation = 1;  // micro-batches per rank per step: enough for the largest share
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  LrSchedule schedule;
};

// The plan of `job` over a training set with PlanEpoch's length keys `train_keys`.
TrainPlan MakeTrainPlan(const JobSpec& job, const LoopWorld& world,
                        const std::vector<uint32_t>& train_keys);

// This rank's micro-batches of one global batch: `plan.accumulation` lists of example indices,
// some maybe empty.
std::vector<std::vector<int64_t>> ShareOf(const JobSpec& job, const LoopWorld& world,
                                          const TrainPlan& plan,
                                          const std::vector<int64_t>& global);

struct TrainData {
  std::unique_ptr<TsvRowIndex> train;  // rows are encoded when a batch of this rank needs them
  std::vector<uint32_t> train_keys;    // PlanEpoch's length keys (TsvRowIndex::LengthKeys)
  std::vector<EncodedExample> eval;    // small: encoded whole, once; empty: no evaluation
  // A training row's text to token ids ([CLS] ... [SEP], truncated); called on the prefetch
  // thread.
  std::function<std::vector<int32_t>(std::string_view)> encode;
  // The same for sentence pairs, with token type ids; set when train->has_pairs().
  PairEncoder encode_pair;
  int32_t pad_id = 0;
  int num_labels = 2;  // 1: regression (no accuracy)
};

// Writes the final model to `dir` from the full parameters (rank 0 only).
using ExportModel = std::function<absl::Status(const std::string& dir, const float* params)>;

class TrainLoop {
 public:
  // `job.output.dir` must exist. The loop owns the engine.
  TrainLoop(JobSpec job, LoopWorld world, TrainData data, TrainPlan plan,
            std::unique_ptr<StepEngine> engine, ExportModel export_model);

  // Where steps, evaluations and checkpoints are reported; not owned, must outlive Run.
  void set_metrics(TrainerMetrics* m) { metrics_ = m != nullptr ? m : null_metrics_.get(); }

  // Resumes from the newest readable checkpoint of output.dir as train.resume says
  // (resume_policy.h; settings that changed are IsSettingsChanged), writes output.dir/job.yaml,
  // then trains to the end (or until `stop` becomes true on any rank: then checkpoints and
  // returns interrupted). A run whose newest checkpoint is of its last step and whose final/ is
  // written returns already_finished without training. A non-finite loss or gradient norm
  // returns Diverged naming the step, with nothing of it checkpointed.
  absl::StatusOr<TrainResult> Run(const std::atomic<bool>* stop = nullptr);

  const TrainPlan& plan() const { return plan_; }
  int64_t encoded_train_rows() const { return encoded_train_rows_.load(); }

 private:
  absl::Status RestoreLatest();
  // train.resume: never on a first attempt: removes what a previous run left in output.dir.
  absl::Status StartOver();
  // After RestoreLatest: whether every rank sees the run finished (see Run).
  absl::StatusOr<bool> AlreadyFinished();
  absl::Status Checkpoint();
  // Evaluation split over the ranks; sums combined (collective).
  absl::StatusOr<EvalResult> EvaluateAll();
  // Whether train.eval_strategy evaluates after the step just taken.
  bool EvaluatesNow(bool epoch_end) const;
  // EvaluateAll, then ranks the evaluation (best model, early stopping) with rank 0's verdict,
  // which every rank adopts (collective), and appends it to metrics.jsonl as of `epoch` unless
  // `record` is false. Sets result->eval and eval_step; *is_best says whether it is the best.
  absl::Status EvaluateAndRank(double epoch, bool record, TrainResult* result, bool* is_best);
  // The fractional epoch reached (HF's state.epoch, rounded to 2 decimals as HF logs it).
  double EpochReached() const;
  // train.load_best_model_at_end: loads the best evaluation's checkpoint into the engine, with
  // its figures into *result (collective).
  absl::Status LoadBestModel(TrainResult* result);
  // Export, the per-rank report, and the final barrier.
  absl::Status Finish(double train_seconds, TrainResult* result);
  bool leader() const { return world_.rank == 0; }
  // One JSON line appended to output.dir/metrics.jsonl; on rank 0 also its figures and `extra`
  // as TensorBoard scalars at its step, flushed (a live TensorBoard sees each step).
  absl::Status AppendMetrics(const nlohmann::json& line, std::vector<ScalarValue> extra = {});
  // Rank 0, output.tensorboard: a new events file in TensorBoardDir, starting at step_ + 1.
  // A directory that cannot be made or written is a warning: training goes on without it.
  void OpenTensorBoard();

  JobSpec job_;
  LoopWorld world_;
  TrainData data_;
  TrainPlan plan_;
  std::unique_ptr<StepEngine> engine_;
  ExportModel export_model_;
  std::atomic<int64_t> encoded_train_rows_{0};  // rows this rank tokenised (tests, logs)
  std::unique_ptr<TrainerMetrics> null_metrics_ = MakeNullMetrics();
  TrainerMetrics* metrics_ = null_metrics_.get();
  // The trajectory settings recorded in every checkpoint and compared on resume.
  RunSettings settings_;
  // The step of the last evaluation line metrics.jsonl kept on resume (-1: none), so that a
  // finished run started again does not append its final evaluation twice; and its figures.
  int64_t restored_eval_step_ = -1;
  EvalResult restored_eval_;
  std::string resumed_from_;  // the log line of the checkpoint resumed from; empty: none
  // The best evaluation so far and the early-stopping count (recorded in checkpoints).
  BestModelTracker best_;
  bool early_stopped_ = false;  // early stopping ended training (recorded in checkpoints)
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0 with output.tensorboard; else null
  // Position.
  int64_t step_ = 0;
  // The step at which a stop asked for now takes effect (read by StopNotice's thread).
  std::atomic<int64_t> stop_step_{1};
  int64_t skipped_steps_ = 0;  // fp16 steps whose update was skipped (this run)
  int epoch_ = 0;
  int64_t cursor_ = 0;  // index of the next global batch in this epoch's plan
  int64_t samples_seen_ = 0;
};

}  // namespace ringmaster::trainer
