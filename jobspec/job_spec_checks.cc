#include "jobspec/job_spec_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"
#include "jobspec/key_suggestion.h"
#include "jobspec/model_memory.h"
#include "jobspec/plan_vars.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::trainer::job_spec_internal {

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 128 || !absl::ascii_isalnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

// train.eval_strategy and the keys that rank evaluations. `bad(path, message)` reports.
template <typename Bad>
void CheckEvaluationKeys(const JobSpec& s, Bad& bad) {
  const TrainSpec& t = s.train;
  if (t.eval_steps < 0) {
    bad("train.eval_steps", absl::StrCat("must be >= 0, got ", t.eval_steps));
  } else if (t.eval_strategy == EvalStrategy::kSteps && t.eval_steps == 0) {
    bad("train.eval_steps", "must be >= 1 with train.eval_strategy steps");
  }
  if (t.early_stopping_patience < 0) {
    bad("train.early_stopping_patience",
        absl::StrCat("must be >= 0 (0 = no early stopping), got ", t.early_stopping_patience));
  }
  if (!(t.early_stopping_threshold >= 0 && std::isfinite(t.early_stopping_threshold))) {
    bad("train.early_stopping_threshold",
        absl::StrCat("must be >= 0, got ", t.early_stopping_threshold));
  }
  // What needs evaluations during training to rank.
  for (const auto& [key, wanted] :
       {std::pair<const char*, bool>{"train.load_best_model_at_end", t.load_best_model_at_end},
        {"train.early_stopping_patience", t.early_stopping_patience > 0}}) {
    if (!wanted) continue;
    if (s.data.eval.empty()) {
      bad(key, "needs evaluation data (data.eval)");
    } else if (t.eval_strategy == EvalStrategy::kNo) {
      bad(key, "needs evaluations during training (train.eval_strategy epoch or steps, not no)");
    }
  }
  if (!t.metric_for_best_model.empty()) {
    const std::optional<std::string> name = BestModelMetricName(t.metric_for_best_model);
    const int labels = s.model.num_labels;
    if (!name) {
      bad("train.metric_for_best_model",
          absl::StrCat("'", t.metric_for_best_model,
                       "' is not a figure evaluation reports: loss, accuracy, f1, "
                       "matthews_correlation, pearson, spearmanr (with or without eval_)"));
    } else if (labels == 1 && (*name == "eval_accuracy" || *name == "eval_f1" ||
                               *name == "eval_matthews_correlation")) {
      bad("train.metric_for_best_model",
          absl::StrCat("'", t.metric_for_best_model,
                       "' is a classification figure; model.num_labels 1 is regression "
                       "(eval_loss, eval_pearson, eval_spearmanr)"));
    } else if (labels > 1 && (*name == "eval_pearson" || *name == "eval_spearmanr")) {
      bad("train.metric_for_best_model",
          absl::StrCat("'", t.metric_for_best_model,
                       "' is a regression figure (model.num_labels 1); this model classifies"));
    } else if (labels > 2 && *name == "eval_f1") {
      bad("train.metric_for_best_model",
          absl::StrCat("eval_f1 is reported for binary classification only; model.num_labels is ",
                       labels));
    }
  }
}

void Validate(const JobSpec& s, const Marks* marks,
              const std::set<std::string, std::less<>>* unknown, Errors& errors) {
  auto mark_of = [&](absl::string_view path) -> const YAML::Mark* {
    if (marks == nullptr) return nullptr;
    // The key itself, else the closest section that was written.
    std::string p(path);
    while (true) {
      auto it = marks->find(p);
      if (it != marks->end()) return &it->second;
      size_t dot = p.rfind('.');
      if (dot == std::string::npos) return nullptr;
      p.resize(dot);
    }
  };
  // Whether any of `paths` is already reported as unreadable: a check comparing it with another
  // setting would judge the default it kept.
  auto unread = [&](std::initializer_list<absl::string_view> paths) {
    for (absl::string_view p : paths) {
      if (errors.Reported(p)) return true;
    }
    return false;
  };
  auto bad = [&](absl::string_view path, absl::string_view msg) {
    if (errors.Reported(path)) return;  // its value could not be read: reported already
    errors.Add(mark_of(path), absl::StrCat(path, ": ", msg));
  };

  if (!ValidName(s.name)) {
    bad("name", absl::StrCat("'", s.name,
                             "' must be 1-128 letters, digits, '-', '_' or '.', starting with a "
                             "letter or digit"));
  }

  // Paths reach C calls, which stop at a NUL: "<outside>/a\0/../<root>/out" would be checked as
  // one path and created as another. Control characters would forge log lines. Issue #20.
  for (const auto& [field, path] :
       {std::pair<const char*, const std::string*>{"model.init_from", &s.model.init_from},
        {"model.vocab", &s.model.vocab},
        {"data.train", &s.data.train},
        {"data.eval", &s.data.eval},
        {"output.dir", &s.output.dir},
        {"output.tensorboard_dir", &s.output.tensorboard_dir}}) {
    if (std::optional<size_t> at = FindControlCharacter(*path)) {
      bad(field, absl::StrFormat("holds a control character (byte 0x%02x at offset %d); paths "
                                 "may not contain any",
                                 static_cast<unsigned char>((*path)[*at]), *at));
    }
  }

  // model
  const ModelSpec& m = s.model;
  if (m.init_from.empty() && !m.has_config) {
    bad("model",
        "set model.init_from (a Hugging Face model directory) or model.config "
        "(BertConfig fields, to train from scratch) with model.vocab");
  } else if (!m.init_from.empty() && m.has_config) {
    bad("model.config", "model.init_from and model.config are both set; use one");
  }
  if (m.has_config && m.vocab.empty()) {
    bad("model.vocab", "is required with model.config (the vocab.txt to tokenize with)");
  }
  if (!m.has_config && !m.vocab.empty()) {
    bad("model.vocab",
        "is only used with model.config; model.init_from uses the directory's "
        "vocab.txt");
  }
  if (m.num_labels < 1) {
    bad("model.num_labels",
        absl::StrCat("must be at least 1 (1 = regression with MSE loss), got ", m.num_labels));
  }
  auto check_prob = [&](absl::string_view path, const std::optional<float>& p) {
    if (p && !(*p >= 0.0f && *p < 1.0f)) bad(path, absl::StrCat("must be in [0, 1), got ", *p));
  };
  check_prob("model.hidden_dropout_prob", m.hidden_dropout_prob);
  check_prob("model.attention_probs_dropout_prob", m.attention_probs_dropout_prob);
  // A model.config with a value that could not be read is reported already; its other fields
  // hold defaults that a check here would blame on the file.
  if (m.has_config && !errors.ReportedUnder("model.config")) {
    BertConfig c = m.config;
    // vocab_size 0 is "from the vocab file", filled in later; check the rest now.
    if (c.vocab_size == 0) c.vocab_size = std::max(1, c.pad_token_id + 1);
    c.num_labels = m.num_labels;
    const YAML::Mark* mark = mark_of("model.config");
    std::string where = (mark != nullptr && ValidMark(*mark))
                            ? absl::StrCat(errors.source(), ":", mark->line + 1, ":",
                                           mark->column + 1, ": model.config")
                            : absl::StrCat(errors.source(), ": model.config");
    if (absl::Status st = ValidateBertConfig(c, where); !st.ok()) {
      errors.AddRaw(mark, std::string(st.message()));
    } else {
      // The model state per rank at the largest world the job can get (procs_per_node auto
      // counts one rank per node): over the absolute cap no node can hold it.
      const DistributedSpec& d = s.distributed;
      const int procs = std::max(jobspec::ParseProcsPerNode(d.procs_per_node).value_or(1), 1);
      const int world = static_cast<int>(
          std::min<int64_t>(int64_t{std::max(d.max_nodes, 1)} * procs, int64_t{1} << 20));
      const uint64_t params = BertParameterCount(c);
      const uint64_t bytes = ModelStateBytesPerRank(params, d.sharding, world, procs);
      if (bytes > kMaxModelStateBytesPerRank) {
        constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
        errors.AddRaw(
            mark,
            absl::StrCat(where, ": the model has ", params,
                         " parameters; their fp32 training state (parameters, gradients, AdamW "
                         "moments) needs ",
                         absl::StrFormat("%.1f", static_cast<double>(bytes) / kGiB),
                         " GiB per rank with distributed.sharding ",
                         std::string(jobspec::SettingName(d.sharding)), " at ", world,
                         " rank(s), over the limit of ", kMaxModelStateBytesPerRank >> 30,
                         " GiB per rank"));
      }
    }
    if (s.data.max_seq_len > c.max_position_embeddings) {
      bad("data.max_seq_len",
          absl::StrCat(s.data.max_seq_len, " is over model.config.max_position_embeddings (",
                       c.max_position_embeddings, ")"));
    }
  }

  // data
  if (s.data.train.empty()) bad("data.train", "is required (a TSV file: sentence<TAB>label)");
  if (s.data.max_seq_len < 2 || s.data.max_seq_len > 8192) {
    bad("data.max_seq_len",
        absl::StrCat("must be in [2, 8192] ([CLS] and [SEP] take two), got ", s.data.max_seq_len));
  }
  if (s.data.text_column.empty()) bad("data.text_column", "must not be empty");
  if (s.data.label_column.empty()) bad("data.label_column", "must not be empty");
  if (!s.data.text_column.empty() && s.data.text_column == s.data.label_column) {
    bad("data.label_column",
        absl::StrCat("names the same column as data.text_column ('", s.data.text_column, "')"));
  }
  if (!s.data.labels.empty()) {
    std::set<std::string> seen;
    for (const std::string& name : s.data.labels) {
      if (name.empty()) bad("data.labels", "a label name is empty");
      if (!seen.insert(name).second)
        bad("data.labels", absl::StrCat("'", name, "' is listed twice"));
    }
    if (unread({"model.num_labels"})) {
      // the count cannot be compared with a number that could not be read
    } else if (s.model.num_labels == 1) {
      bad("data.labels", "names classes, but model.num_labels: 1 is regression");
    } else if (s.data.labels.size() != static_cast<size_t>(s.model.num_labels)) {
      bad("data.labels", absl::StrCat("has ", s.data.labels.size(),
                                      " names but model.num_labels is ", s.model.num_labels));
    }
  }
  const std::string& pair = s.data.text_pair_column;
  if (!pair.empty() && (pair == s.data.text_column || pair == s.data.label_column)) {
    bad("data.text_pair_column",
        absl::StrCat("names the same column as data.",
                     pair == s.data.text_column ? "text_column" : "label_column", " ('", pair,
                     "')"));
  }
  if (!pair.empty() && s.data.max_seq_len < 3) {
    bad("data.max_seq_len",
        absl::StrCat("must be >= 3 for sentence pairs ([CLS] a [SEP] b [SEP]), got ",
                     s.data.max_seq_len));
  }

  // train
  const TrainSpec& t = s.train;
  if (t.max_steps < 0) bad("train.max_steps", absl::StrCat("must be >= 0, got ", t.max_steps));
  if (t.max_steps <= 0 && t.epochs < 1) {
    bad("train.epochs", absl::StrCat("must be >= 1 unless train.max_steps > 0, got ", t.epochs));
  } else if (t.epochs < 0) {
    bad("train.epochs", absl::StrCat("must be >= 0, got ", t.epochs));
  }
  if (t.global_batch_size < 1) {
    bad("train.global_batch_size", absl::StrCat("must be >= 1, got ", t.global_batch_size));
  }
  if (t.micro_batch_size < 1) {
    bad("train.micro_batch_size", absl::StrCat("must be >= 1, got ", t.micro_batch_size));
  }
  if (t.global_batch_size >= 1 && t.micro_batch_size >= 1 &&
      t.global_batch_size % t.micro_batch_size != 0 && !unread({"train.micro_batch_size"})) {
    bad("train.global_batch_size",
        absl::StrCat(t.global_batch_size, " is not a multiple of train.micro_batch_size (",
                     t.micro_batch_size,
                     "); gradient accumulation is derived as global_batch_size / "
                     "(micro_batch_size x ranks), so it must divide evenly"));
  }
  if (!(t.lr > 0)) bad("train.lr", absl::StrCat("must be > 0, got ", t.lr));
  // Checked whatever the schedule, so a job switched to polynomial later is not broken already.
  if (!(t.lr_end >= 0 && std::isfinite(t.lr_end))) {
    bad("train.lr_end", absl::StrCat("must be >= 0, got ", t.lr_end));
  } else if (t.lr_schedule == LrScheduleKind::kPolynomial && t.lr > 0 && !(t.lr_end < t.lr) &&
             !unread({"train.lr", "train.lr_schedule"})) {
    // HF raises the same: the polynomial decay goes down from lr to lr_end.
    bad("train.lr_end", absl::StrCat("must be below train.lr (", t.lr,
                                     ") for lr_schedule polynomial, got ", t.lr_end));
  }
  if (!(t.lr_power > 0 && std::isfinite(t.lr_power))) {
    bad("train.lr_power", absl::StrCat("must be > 0, got ", t.lr_power));
  }
  if (!(t.warmup_ratio >= 0 && t.warmup_ratio < 1)) {
    bad("train.warmup_ratio", absl::StrCat("must be in [0, 1), got ", t.warmup_ratio));
  }
  if (t.warmup_steps < 0) {
    bad("train.warmup_steps", absl::StrCat("must be >= 0, got ", t.warmup_steps));
  } else if (t.max_steps > 0 && t.warmup_steps >= t.max_steps && !unread({"train.max_steps"})) {
    bad("train.warmup_steps",
        absl::StrCat(t.warmup_steps, " must be below train.max_steps (", t.max_steps, ")"));
  }
  if (!(t.weight_decay >= 0)) {
    bad("train.weight_decay", absl::StrCat("must be >= 0, got ", t.weight_decay));
  }
  if (!(t.adam_beta1 >= 0 && t.adam_beta1 < 1 && t.adam_beta2 >= 0 && t.adam_beta2 < 1)) {
    bad("train.adam_betas",
        absl::StrCat("each beta must be in [0, 1), got [", t.adam_beta1, ", ", t.adam_beta2, "]"));
  }
  if (!(t.adam_eps > 0)) bad("train.adam_eps", absl::StrCat("must be > 0, got ", t.adam_eps));
  if (!(t.max_grad_norm >= 0)) {
    bad("train.max_grad_norm",
        absl::StrCat("must be >= 0 (0 disables clipping), got ", t.max_grad_norm));
  }
  if (t.eval_batch_size < 1) {
    bad("train.eval_batch_size", absl::StrCat("must be >= 1, got ", t.eval_batch_size));
  }
  CheckEvaluationKeys(s, bad);
  if (t.log_every_steps < 0) {
    bad("train.log_every_steps",
        absl::StrCat("must be >= 0 (0 = every few seconds), got ", t.log_every_steps));
  }

  // output
  if (s.output.dir.empty()) bad("output.dir", "is required");
  if (s.output.checkpoint_every_steps < 0) {
    bad("output.checkpoint_every_steps",
        absl::StrCat("must be >= 0 (0 = no periodic checkpoints), got ",
                     s.output.checkpoint_every_steps));
  }
  if (s.output.keep_checkpoints < 1) {
    bad("output.keep_checkpoints", absl::StrCat("must be >= 1, got ", s.output.keep_checkpoints));
  }
  if (!s.output.tensorboard && !s.output.tensorboard_dir.empty()) {
    bad("output.tensorboard_dir",
        "is set while output.tensorboard is false, so nothing would be written there; remove "
        "one of them");
  }

  // distributed
  const DistributedSpec& d = s.distributed;
  if (d.min_nodes < 1 || d.max_nodes < d.min_nodes) {
    bad("distributed.nodes",
        absl::StrCat("needs 1 <= MIN <= MAX, got ", d.min_nodes, ":", d.max_nodes));
  }
  if (!jobspec::ParseProcsPerNode(d.procs_per_node).ok()) {
    bad("distributed.procs_per_node",
        absl::StrCat("must be auto or a positive integer, got '", d.procs_per_node, "'"));
  }
  if (d.powersgd_rank < 1) {
    bad("distributed.powersgd_rank", absl::StrCat("must be >= 1, got ", d.powersgd_rank));
  }
  if (d.powersgd_start_step < -1) {
    bad("distributed.powersgd_start_step",
        absl::StrCat("must be >= 0 (or -1: the LR warmup or the first 10% of steps, whichever is "
                     "longer), got ",
                     d.powersgd_start_step));
  }
  if (!(d.bucket_cap_mb >= 0) || !std::isfinite(d.bucket_cap_mb)) {
    bad("distributed.bucket_cap_mb",
        absl::StrCat("must be a number >= 0 (0: one bucket per unit), got ", d.bucket_cap_mb));
  } else if (d.bucket_cap_mb > 0 && d.sharding != Sharding::kNoShard) {
    // Only DDP buckets its all-reduces; the sharded modes reduce per unit (FSDP has no such
    // setting), so a cap there would be silently ignored: refuse it.
    bad("distributed.bucket_cap_mb",
        absl::StrCat("buckets only no_shard's gradient all-reduces; sharding ",
                     std::string(jobspec::SettingName(d.sharding)),
                     " reduces each unit on its own: remove bucket_cap_mb or use no_shard"));
  }
  const bool device_known = unknown == nullptr || !unknown->contains("train.device");
  if (d.backend == Backend::kNccl && t.device == Device::kCpu && device_known) {
    bad("distributed.backend", "nccl needs train.device cuda (or auto); CPU ranks use gloo");
  }

  if (s.restart.max_restarts < 0) {
    bad("restart.max_restarts", absl::StrCat("must be >= 0, got ", s.restart.max_restarts));
  }
}

}  // namespace ringmaster::trainer::job_spec_internal

namespace ringmaster::trainer {

std::optional<std::string> BestModelMetricName(std::string_view name) {
  std::string n(name);
  if (n.rfind("eval_", 0) != 0) n = "eval_" + n;
  for (const char* known : {"eval_loss", "eval_accuracy", "eval_f1", "eval_matthews_correlation",
                            "eval_pearson", "eval_spearmanr"}) {
    if (n == known) return n;
  }
  return std::nullopt;
}

bool GreaterIsBetter(const TrainSpec& t) {
  if (t.greater_is_better) return *t.greater_is_better;
  // HF: a name ending in "loss" is minimised, everything else maximised.
  const std::string name = t.metric_for_best_model.empty() ? "eval_loss" : t.metric_for_best_model;
  return !(name.size() >= 4 && name.compare(name.size() - 4, 4, "loss") == 0);
}

}  // namespace ringmaster::trainer
