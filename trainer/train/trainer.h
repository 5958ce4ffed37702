// `ringmaster-trainer train`'s assembly: from a job spec, one process or one rank of many, it
// checks the job's settings, loads the model and its tokenizer, indexes the training data and
// encodes the evaluation data, plans the run, builds the step engine (today the CPU engine:
// BertModel<float> over the data-parallel engine, cpu_engine.h) and hands them to the training
// loop (train_loop.h), which owns accumulation, evaluation, checkpoints, resume and export.
// Also the model loading and single-process evaluation that `predict` uses.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/trainer_metrics.h"
#include "jobspec/bert_config.h"
#include "jobspec/job_spec.h"
#include "trainer/data/batcher.h"
#include "trainer/data/tsv.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/parallel/rank_settings.h"
#include "trainer/text/wordpiece.h"
#include "trainer/train/step_engine.h"
#include "trainer/train/train_loop.h"

namespace ringmaster::trainer {

// A model with its tokenizer, as loaded for training or prediction.
struct LoadedModel {
  BertConfig config;
  ParamLayout layout;
  std::vector<float> params;
  // Where the vocabulary came from (vocab.txt, or tokenizer.json), for messages.
  std::string vocab_path;
  bool do_lower_case = true;
  // Which HF tokenizer `tokenizer` reproduces: the job's model.tokenizer_compat, or for predict
  // what the directory's tokenizer_config.json recorded.
  TokenizerCompat tokenizer_compat = TokenizerCompat::kSlow;
  // The directory's tokenizer_config.json model_max_length (for a run's final/, the length it
  // was trained with); 0 when absent.
  int model_max_length = 0;
  std::unique_ptr<WordPieceTokenizer> tokenizer;
  // The columns the model was trained on (its directory's kDataColumnsFile; the defaults when
  // absent), for predict.
  TableOptions columns;
};

// The file an export records its training data's column names in (JSON: text_column,
// text_pair_column, label_column), so that predict reads inputs as training did.
inline constexpr char kDataColumnsFile[] = "ringmaster_data.json";

// predict: `input` (any format; its columns as the model was trained on) run through the model
// `m`, as TSV text: a header ("label", then one column per class named by id2label), then one
// line per input row in order: the predicted class (its name when the model has label names,
// else its id), then the logits, or with `probabilities` their softmax (what HF's
// text-classification pipeline gives with top_k=None, in label-id order); a regression model
// (num_labels 1) has no probabilities and is refused.
absl::StatusOr<std::string> PredictFile(const LoadedModel& m, const std::string& input, int max_len,
                                        bool probabilities = false);

// How the job's data files are read (data.format and the column names).
TableOptions TableOptionsForJob(const JobSpec& job);

// From the job's model section: init_from (HF dir) or config + vocab (random init).
absl::StatusOr<LoadedModel> LoadModelForJob(const JobSpec& job);
// From a HF directory (predict), with the tokenizer mode the directory records (slow when it
// records none) unless `compat` overrides it. A sentence-transformers folder is read through
// its transformer module (hf_model_dir.h).
absl::StatusOr<LoadedModel> LoadModelDir(const std::string& dir,
                                         std::optional<TokenizerCompat> compat = std::nullopt);

// Runs the model over `data` (in order) without dropout; logits (rows × C) into `logits`.
EvalResult Evaluate(BertModel<float>& model, const LoadedModel& m,
                    const std::vector<EncodedExample>& data, int batch_size,
                    std::vector<float>* logits);

// Builds the step engine of `train.device: cuda` from the job and the rank's resolved settings,
// the loaded model (its config, layout and initial parameters) for this rank of `dist`, in a run
// of `total_steps` with `warmup_steps` of LR warmup (PowerSGD's default start). A binary linked
// with the CUDA engine passes one to Trainer::Create (trainer/cuda/engine/cuda_engine_factory.h).
using CudaEngineFactory = std::function<absl::StatusOr<std::unique_ptr<StepEngine>>(
    const JobSpec& job, const RankSettings& settings, const BertConfig& config,
    const ParamLayout& layout, const float* initial, DistContext& dist, int64_t total_steps,
    int64_t warmup_steps)>;

class Trainer {
 public:
  // `settings` are the rank's (ResolveRankSettings, which refuses what this build and machine
  // cannot run); `dist` is this rank's context (null: a single process), which must outlive the
  // trainer; `cuda` builds the engine of a CUDA rank.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const JobSpec& job,
                                                         const RankSettings& settings,
                                                         DistContext* dist = nullptr,
                                                         const CudaEngineFactory& cuda = nullptr);

  // Where steps, evaluations and checkpoints are reported; not owned, must outlive Run.
  void set_metrics(TrainerMetrics* m) { loop_->set_metrics(m); }

  // Trains to the end (or until `stop` becomes true: then checkpoints and returns early).
  // A failure is explained by the distributed context (e.g. naming a lost rank).
  absl::StatusOr<TrainResult> Run(const std::atomic<bool>* stop = nullptr);

 private:
  Trainer() = default;

  std::unique_ptr<DistContext> own_dist_;  // a world of one when none was given
  DistContext* dist_ = nullptr;
  std::unique_ptr<TrainLoop> loop_;  // destroyed before own_dist_
};

}  // namespace ringmaster::trainer
