// Training of a BertForSequenceClassification from a job spec, as one process or as one rank of
// many: data (each rank indexes the training file, then reads, tokenises and batches only its
// share of every global batch), model, the data-parallel engine (sharding, gradient reduction,
// AdamW with schedule and clipping), gradient accumulation, evaluation each epoch, sharded
// checkpoints with resume (at any world size), and the final Hugging Face export.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trainer_metrics.h"
#include "jobspec/bert_config.h"
#include "jobspec/job_spec.h"
#include "trainer/data/batcher.h"
#include "trainer/data/tsv_row_index.h"
#include "trainer/dist/data_parallel.h"
#include "trainer/dist/dist_context.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/lr_schedule.h"
#include "trainer/text/wordpiece.h"
#include "trainer/train/slowdown.h"

namespace ringmaster::trainer {

struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // classification only
  int64_t examples = 0;
};

// A failure because training diverged (the loss or the gradient norm became NaN or inf), as
// opposed to a broken peer or file: the same data and weights would diverge again, so a
// supervisor must not restart it. `ringmaster-trainer train` exits kExitDiverged
// (common/exit_codes.h) for it.
absl::Status Diverged(const std::string& message);
bool IsDiverged(const absl::Status& status);

struct TrainResult {
  int64_t steps = 0;
  EvalResult eval;  // after the last epoch (examples == 0 without eval data)
  std::string export_dir;
  bool interrupted = false;  // stopped by a signal after checkpointing
};

// A model with its tokenizer, as loaded for training or prediction.
struct LoadedModel {
  BertConfig config;
  ParamLayout layout;
  std::vector<float> params;
  std::string vocab_path;
  bool do_lower_case = true;
  std::unique_ptr<WordPieceTokenizer> tokenizer;
};

// From the job's model section: init_from (HF dir) or config + vocab (random init).
absl::StatusOr<LoadedModel> LoadModelForJob(const JobSpec& job);
// From a HF directory (predict).
absl::StatusOr<LoadedModel> LoadModelDir(const std::string& dir);

// Runs the model over `data` (in order) without dropout; logits (rows × C) into `logits`.
EvalResult Evaluate(BertModel<float>& model, const LoadedModel& m,
                    const std::vector<EncodedExample>& data, int batch_size,
                    std::vector<float>* logits);

class Trainer {
 public:
  // `dist` is this rank's context (null: a single process). It must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const JobSpec& job,
                                                         DistContext* dist = nullptr);

  // Where the run reports its figures (default: nowhere).
  // Where steps, evaluations and checkpoints are reported; not owned, must outlive Run.
  void set_metrics(TrainerMetrics* m) { metrics_ = m != nullptr ? m : null_metrics_.get(); }

  // Trains to the end (or until `stop` becomes true: then checkpoints and returns early).
  absl::StatusOr<TrainResult> Run(const std::atomic<bool>* stop = nullptr);

 private:
  Trainer() = default;
  absl::StatusOr<TrainResult> RunSteps(const std::atomic<bool>* stop);
  absl::Status RestoreLatest();
  absl::Status Checkpoint();
  // Evaluation split over the ranks; sums combined (collective).
  absl::StatusOr<EvalResult> EvaluateAll();
  // This rank's micro-batches of one global batch: `accumulation_` lists, some maybe empty.
  std::vector<std::vector<int64_t>> ShareOf(const std::vector<int64_t>& global) const;
  // Rank `rank`'s slice [first, second) of a global batch of n samples: equal shares, or
  // proportional to RINGMASTER_RANK_WEIGHTS.
  std::pair<size_t, size_t> SliceOf(size_t n, int rank) const;
  bool leader() const { return dist_->rank() == 0; }
  // One JSON line appended to output.dir/metrics.jsonl.
  absl::Status AppendMetrics(const nlohmann::json& line);

  JobSpec job_;
  LoadedModel model_;
  std::unique_ptr<TsvRowIndex> train_;  // rows are encoded when a batch of this rank needs them
  std::vector<uint32_t> train_keys_;    // PlanEpoch's length keys (TsvRowIndex::LengthKeys)
  std::vector<EncodedExample> eval_;    // small: encoded whole, once
  int max_len_ = 0;                     // tokens per row, [CLS] and [SEP] included
  std::atomic<int64_t> encoded_train_rows_{0};  // rows this rank tokenised (tests, logs)
  std::unique_ptr<DistContext> own_dist_;       // a world of one when none was given
  DistContext* dist_ = nullptr;
  std::unique_ptr<BertModel<float>> net_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<TrainerMetrics> null_metrics_ = MakeNullMetrics();
  TrainerMetrics* metrics_ = null_metrics_.get();
  Slowdown slowdown_;  // RINGMASTER_SLOWDOWN (a simulated slower device)
  LrSchedule schedule_;
  int accumulation_ = 1;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  // Position.
  int64_t step_ = 0;
  int epoch_ = 0;
  int64_t cursor_ = 0;  // index of the next global batch in this epoch's plan
  int64_t samples_seen_ = 0;
};

}  // namespace ringmaster::trainer
