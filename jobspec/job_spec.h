// The job spec: the YAML file a user writes (docs/job-reference.md), parsed strictly.
//
// Strict because a typo in a training job is expensive: `lrr: 1e-3` silently ignored would
// cost a whole run. Unknown keys, duplicated keys, wrong types and out-of-range values are
// errors naming the file, line, column and key path, e.g.
//   job.yaml:12:3: unknown key 'train.lrr'
// All problems found are reported together, one per line, so one edit fixes them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/bert_config.h"
#include "jobspec/job_settings.h"

// The job spec's types stay in ringmaster::trainer (where every user names them); the typed
// settings live in ringmaster::jobspec and are visible here too.
namespace ringmaster::trainer {

using jobspec::Backend;
using jobspec::Compression;
using jobspec::DataFormat;
using jobspec::Device;
using jobspec::EvalStrategy;
using jobspec::LrScheduleKind;
using jobspec::Precision;
using jobspec::ResumeMode;
using jobspec::SettingName;
using jobspec::Sharding;
using jobspec::TokenizerCompat;

struct ModelSpec {
  // A Hugging Face model directory (config.json, model.safetensors, vocab.txt), or empty.
  std::string init_from;
  // True when `model.config:` was given (train from scratch). Exactly one of init_from/config.
  bool has_config = false;
  // From `model.config:` (HF config.json field names). config.vocab_size == 0 means it was not
  // written: the caller sets it to the number of lines in `vocab` (and validates again).
  // config.num_labels mirrors `num_labels`.
  BertConfig config;
  std::string vocab;  // vocab.txt; required with config, refused with init_from
  bool do_lower_case = true;
  // Which HF tokenizer training and predict reproduce; recorded in the export's
  // tokenizer_config.json, which predict reads back.
  TokenizerCompat tokenizer_compat = TokenizerCompat::kSlow;
  int num_labels = 2;
  // Overrides of the dropout in init_from's config.json. With `config:` they are folded into
  // `config` during parsing and these stay empty.
  std::optional<float> hidden_dropout_prob, attention_probs_dropout_prob;
};

struct DataSpec {
  std::string train, eval;  // TSV, CSV or JSON Lines; eval empty = no evaluation
  DataFormat format = DataFormat::kAuto;
  std::string text_column = "sentence";  // the column (JSON key) holding the text
  std::string label_column = "label";
  std::string text_pair_column;  // sentence pairs' second text; empty: single texts
  // Class names, in id order: label cells are these names. Empty: class ids, or names inferred
  // from data.train (sorted) when its first label is not an integer (trainer/data/tsv.h).
  std::vector<std::string> labels;
  int max_seq_len = 128;
  bool shuffle = true;
};

struct TrainSpec {
  int epochs = 3;
  int64_t max_steps = 0;  // > 0 wins over epochs
  int global_batch_size = 32;
  int micro_batch_size = 16;
  double lr = 2e-5;
  LrScheduleKind lr_schedule = LrScheduleKind::kLinear;
  // polynomial only (HF get_polynomial_decay_schedule_with_warmup's lr_end and power): the LR
  // decays from lr to lr_end as (1 - progress)^lr_power.
  double lr_end = 1e-7;
  double lr_power = 1.0;
  double warmup_ratio = 0.0;
  int64_t warmup_steps = 0;  // > 0 wins over warmup_ratio
  double weight_decay = 0.01;
  double adam_beta1 = 0.9, adam_beta2 = 0.999;  // YAML: adam_betas: [b1, b2]
  double adam_eps = 1e-8;
  double max_grad_norm = 1.0;  // 0 disables clipping
  Precision precision = Precision::kAuto;
  Device device = Device::kCpu;
  uint64_t seed = 42;
  int eval_batch_size = 64;
  // When data.eval is evaluated during training: after every epoch, every eval_steps steps, or
  // never (the final weights are still evaluated at the end).
  EvalStrategy eval_strategy = EvalStrategy::kEpoch;
  int64_t eval_steps = 0;  // with kSteps: >= 1
  // The evaluation figure that ranks evaluations (best model, early stopping), as metrics.jsonl
  // names it ("eval_loss", "eval_accuracy", ...; the "eval_" prefix may be left out). Empty:
  // eval_loss.
  std::string metric_for_best_model;
  // Unset: lower is better for a loss, higher for every other figure (as HF infers it).
  std::optional<bool> greater_is_better;
  // Exports the best evaluation's weights as final/ (a checkpoint is saved at every evaluation).
  bool load_best_model_at_end = false;
  // > 0: stop after this many evaluations in a row that do not beat the best by more than
  // early_stopping_threshold (HF's EarlyStoppingCallback).
  int early_stopping_patience = 0;
  double early_stopping_threshold = 0.0;
  int64_t log_every_steps = 0;  // 0 = time based
  // Backward recomputes each encoder layer's forward instead of keeping its intermediates
  // (HF's gradient_checkpointing): less activation memory, one more forward of compute; the
  // same losses and gradients.
  bool gradient_checkpointing = false;
  // Checkpoints already in output.dir: resume when the run's trajectory settings match (auto),
  // start over (never), or resume whatever changed (force). trainer/train/resume_policy.h.
  ResumeMode resume = ResumeMode::kAuto;
};

struct OutputSpec {
  std::string dir;
  int64_t checkpoint_every_steps = 500;  // 0 = no periodic checkpoints
  int keep_checkpoints = 3;
  // TensorBoard events files of the run's scalars (rank 0), beside metrics.jsonl.
  bool tensorboard = true;
  std::string tensorboard_dir;  // empty: <dir>/runs
};

struct DistributedSpec {
  int min_nodes = 1, max_nodes = 1;     // YAML: nodes: N | "MIN:MAX"
  std::string procs_per_node = "auto";  // "auto" or a positive integer in decimal
  Sharding sharding = Sharding::kNoShard;
  Compression compression = Compression::kNone;
  int powersgd_rank = 4;             // rank of PowerSGD's factors
  int64_t powersgd_start_step = -1;  // steps all-reduced exactly first; -1 = max(LR warmup, 10%)
  bool skip_zero_blocks = true;      // all-reduces skip 256-value blocks zero on every rank
  // no_shard: MiB of gradients per all-reduce bucket (DDP's bucket_cap_mb); 0 = one per unit.
  double bucket_cap_mb = 0;
  Backend backend = Backend::kAuto;
};

struct RestartSpec {
  int max_restarts = 3;  // for the whole job, not per node
};

struct JobSpec {
  std::string name = "job";
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  OutputSpec output;
  DistributedSpec distributed;
  RestartSpec restart;
  std::string source;  // file name for messages
};

// Parses YAML text. `source` names the file in errors. Relative paths (model.init_from,
// model.vocab, data.train, data.eval, output.dir) are resolved against `base_dir` (the job
// file's directory; empty leaves them as written), so a job means the same thing wherever it is
// submitted from. Runs ValidateJobSpec's checks, with line numbers.
absl::StatusOr<JobSpec> ParseJobSpec(std::string_view yaml_text, std::string_view source,
                                     std::string_view base_dir);

// The largest job file anything here reads or accepts: 256 KiB. A real one is a few KiB; at
// 1 MiB, 20 submissions grew the coordinator by 13.8 MB (issue #31). The trainer, `ringmaster
// local`, `ringmaster submit` and the coordinator all refuse a larger one with
// JobFileTooLarge's message.
inline constexpr size_t kMaxJobFileBytes = size_t{256} << 10;

// InvalidArgument "<name>: <bytes> bytes; a job file may have at most 262144 bytes (256 KiB)".
absl::Status JobFileTooLarge(std::string_view name, size_t bytes);

// The text of the job file `path` (a regular file): NotFound etc. naming the path, and
// JobFileTooLarge for a file over kMaxJobFileBytes, before any of it is read.
absl::StatusOr<std::string> ReadJobFile(const std::string& path);

// Reads (ReadJobFile) and parses `path`; relative paths in it are resolved against its
// (absolute) directory.
absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path);

// Every key path the parser accepts, sorted: sections ("train", "model.config") and the keys in
// them ("train.lr", "model.config.hidden_size"). Taken from the parser's own lookups, so it
// cannot fall behind it (docs/job-reference.md is checked against it).
std::vector<std::string> JobSpecKnownKeys();

// "eval_accuracy" for "accuracy" or "eval_accuracy": the metrics.jsonl name of a
// train.metric_for_best_model value, or nullopt when evaluation reports no such figure.
std::optional<std::string> BestModelMetricName(std::string_view name);
// Whether a higher train.metric_for_best_model is better: train.greater_is_better when set,
// else as HF infers it (a name ending in "loss" is minimised, any other figure maximised).
bool GreaterIsBetter(const TrainSpec& train);

// Cross-field and range checks, for specs built or edited in code. Errors name spec.source.
absl::Status ValidateJobSpec(const JobSpec& spec);

// YAML that ParseJobSpec reads back to the same spec (every field written out, paths as
// resolved); recorded in run directories so a run says exactly what it did.
std::string JobSpecToYaml(const JobSpec& spec);

}  // namespace ringmaster::trainer
