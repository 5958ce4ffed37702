#include "trainer/train/resume_policy.h"

#include <charconv>
#include <filesystem>
#include <system_error>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::trainer {
namespace {

constexpr char kSettingsChangedPayload[] = "ringmaster.dev/settings-changed";
constexpr char kAllCheckpointsDamagedPayload[] = "ringmaster.dev/all-checkpoints-damaged";
constexpr char kAnotherModelPayload[] = "ringmaster.dev/checkpoint-of-another-model";
constexpr char kNotSet[] = "(not set)";

// Shortest text that reads back as the same value: 0.1 stays "0.1", and two values that differ
// in the last bit never print alike.
template <typename T>
std::string Text(T v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return absl::StrCat(v);
  return std::string(buf, end);
}

std::string Bool(bool b) { return b ? "true" : "false"; }

std::string FileWithSize(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? absl::StrCat(path, " (unreadable)") : absl::StrCat(path, " (", n, " bytes)");
}

}  // namespace

RunSettings TrajectorySettings(const JobSpec& job) {
  RunSettings s;
  const ModelSpec& m = job.model;
  if (!m.init_from.empty()) s["model.init_from"] = m.init_from;
  if (m.has_config) {
    const BertConfig& c = m.config;
    const std::string p = "model.config.";
    // vocab_size 0: taken from the vocab file, which is recorded below.
    if (c.vocab_size != 0) s[p + "vocab_size"] = Text(c.vocab_size);
    s[p + "hidden_size"] = Text(c.hidden_size);
    s[p + "num_hidden_layers"] = Text(c.num_hidden_layers);
    s[p + "num_attention_heads"] = Text(c.num_attention_heads);
    s[p + "intermediate_size"] = Text(c.intermediate_size);
    s[p + "max_position_embeddings"] = Text(c.max_position_embeddings);
    s[p + "type_vocab_size"] = Text(c.type_vocab_size);
    s[p + "hidden_dropout_prob"] = Text(c.hidden_dropout_prob);
    s[p + "attention_probs_dropout_prob"] = Text(c.attention_probs_dropout_prob);
    s[p + "layer_norm_eps"] = Text(c.layer_norm_eps);
    s[p + "initializer_range"] = Text(c.initializer_range);
    s[p + "hidden_act"] = c.hidden_act;
    s["model.vocab"] = FileWithSize(m.vocab);
    // With init_from the tokenizer's settings are its directory's, not this key's.
    s["model.do_lower_case"] = Bool(m.do_lower_case);
  }
  // Either way the tokenizer's Unicode behaviour is this key's. Recorded only when not the
  // default, so that checkpoints from before the key existed (all slow) still resume.
  if (m.tokenizer_compat != TokenizerCompat::kSlow) {
    s["model.tokenizer_compat"] = std::string(SettingName(m.tokenizer_compat));
  }
  s["model.num_labels"] = Text(m.num_labels);
  if (m.hidden_dropout_prob) s["model.hidden_dropout_prob"] = Text(*m.hidden_dropout_prob);
  if (m.attention_probs_dropout_prob) {
    s["model.attention_probs_dropout_prob"] = Text(*m.attention_probs_dropout_prob);
  }
  s["data.train"] = FileWithSize(job.data.train);
  s["data.max_seq_len"] = Text(job.data.max_seq_len);
  s["data.shuffle"] = Bool(job.data.shuffle);
  // How rows are read: which column is the text, the label, the second text, the label names and
  // the file format. Recorded only when not at their defaults, so that checkpoints written
  // before they were recorded (all of them at the defaults) still resume; a change from a
  // default shows as "(not set) -> value".
  const DataSpec& d = job.data;
  const DataSpec defaults;
  if (d.format != defaults.format) s["data.format"] = std::string(SettingName(d.format));
  if (d.text_column != defaults.text_column) s["data.text_column"] = d.text_column;
  if (d.label_column != defaults.label_column) s["data.label_column"] = d.label_column;
  if (!d.text_pair_column.empty()) s["data.text_pair_column"] = d.text_pair_column;
  if (!d.labels.empty()) s["data.labels"] = absl::StrCat("[", absl::StrJoin(d.labels, ", "), "]");
  const TrainSpec& t = job.train;
  // Only the length setting in force: max_steps > 0 makes epochs irrelevant.
  if (t.max_steps > 0) {
    s["train.max_steps"] = Text(t.max_steps);
  } else {
    s["train.epochs"] = Text(t.epochs);
  }
  s["train.global_batch_size"] = Text(t.global_batch_size);
  s["train.lr"] = Text(t.lr);
  s["train.lr_schedule"] = std::string(SettingName(t.lr_schedule));
  // Only polynomial decays to lr_end with lr_power; other schedules ignore them.
  if (t.lr_schedule == LrScheduleKind::kPolynomial) {
    s["train.lr_end"] = Text(t.lr_end);
    s["train.lr_power"] = Text(t.lr_power);
  }
  // Likewise warmup_steps > 0 wins over warmup_ratio.
  if (t.warmup_steps > 0) {
    s["train.warmup_steps"] = Text(t.warmup_steps);
  } else {
    s["train.warmup_ratio"] = Text(t.warmup_ratio);
  }
  s["train.weight_decay"] = Text(t.weight_decay);
  s["train.adam_betas"] = absl::StrCat("[", Text(t.adam_beta1), ", ", Text(t.adam_beta2), "]");
  s["train.adam_eps"] = Text(t.adam_eps);
  s["train.max_grad_norm"] = Text(t.max_grad_norm);
  s["train.seed"] = Text(t.seed);
  // Early stopping decides where training ends, and load_best_model_at_end which weights are
  // exported (and which checkpoint pruning keeps: switching it on in the middle of a run could
  // find the best checkpoint pruned). With neither, evaluations change nothing that is trained.
  if (t.early_stopping_patience > 0 || t.load_best_model_at_end) {
    s["train.eval_strategy"] = std::string(SettingName(t.eval_strategy));
    if (t.eval_strategy == EvalStrategy::kSteps) s["train.eval_steps"] = Text(t.eval_steps);
    s["train.metric_for_best_model"] =
        BestModelMetricName(t.metric_for_best_model.empty() ? "eval_loss" : t.metric_for_best_model)
            .value_or(t.metric_for_best_model);
    s["train.greater_is_better"] = Bool(GreaterIsBetter(t));
  }
  if (t.early_stopping_patience > 0) {
    s["train.early_stopping_patience"] = Text(t.early_stopping_patience);
    s["train.early_stopping_threshold"] = Text(t.early_stopping_threshold);
  }
  if (t.load_best_model_at_end) s["train.load_best_model_at_end"] = Bool(true);
  return s;
}

std::vector<SettingChange> DiffSettings(const RunSettings& checkpoint, const RunSettings& job) {
  std::vector<SettingChange> out;
  auto a = checkpoint.begin();
  auto b = job.begin();
  // Both maps are sorted by key: one merge pass.
  while (a != checkpoint.end() || b != job.end()) {
    if (b == job.end() || (a != checkpoint.end() && a->first < b->first)) {
      out.push_back({a->first, a->second, kNotSet});
      ++a;
    } else if (a == checkpoint.end() || b->first < a->first) {
      out.push_back({b->first, kNotSet, b->second});
      ++b;
    } else {
      if (a->second != b->second) out.push_back({a->first, a->second, b->second});
      ++a;
      ++b;
    }
  }
  return out;
}

std::string FormatChanges(const std::vector<SettingChange>& changes) {
  std::string out;
  for (const SettingChange& c : changes) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", c.key, " ", c.before, " -> ", c.after);
  }
  return out;
}

absl::Status SettingsChanged(const std::string& checkpoint_dir,
                             const std::vector<SettingChange>& changes) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat(
      checkpoint_dir, " was written by a run with other settings (checkpoint -> this job): ",
      FormatChanges(changes),
      ". Resuming would mix two trainings. To start over in this output.dir set train.resume: "
      "never (or pass --overwrite); to resume anyway set train.resume: force (or pass --resume); "
      "or give the job another output.dir"));
  s.SetPayload(kSettingsChangedPayload, absl::Cord("1"));
  return s;
}

bool IsSettingsChanged(const absl::Status& status) {
  return status.GetPayload(kSettingsChangedPayload).has_value();
}

absl::Status AllCheckpointsDamaged(const std::vector<std::string>& damaged) {
  absl::Status s = absl::DataLossError(absl::StrCat(
      "every checkpoint of this run is damaged (", damaged.size(), ": ",
      absl::StrJoin(damaged, ", "),
      "; the reasons are logged above); not training again from step 0 over them. Delete "
      "these directories (or set train.resume: never, or pass --overwrite) to start over, or "
      "restore them from a copy"));
  s.SetPayload(kAllCheckpointsDamagedPayload, absl::Cord("1"));
  return s;
}

bool IsAllCheckpointsDamaged(const absl::Status& status) {
  return status.GetPayload(kAllCheckpointsDamagedPayload).has_value();
}

absl::Status CheckpointsWithoutManifest(const std::string& checkpoint_root,
                                        const std::vector<std::string>& orphans) {
  std::vector<std::string> names;
  for (const std::string& o : orphans) {
    names.push_back(std::filesystem::path(o).filename().string() + "/manifest.json");
  }
  absl::Status s = absl::DataLossError(absl::StrCat(
      "no checkpoint of this run has its manifest: ", checkpoint_root, " holds ", orphans.size(),
      " checkpoint director", orphans.size() == 1 ? "y" : "ies", " whose manifest is missing (",
      absl::StrJoin(names, ", "), "); not training again from step 0 over them. Delete ",
      checkpoint_root,
      " (or set train.resume: never, or pass --overwrite) to start over, or restore the "
      "manifests from a copy"));
  s.SetPayload(kAllCheckpointsDamagedPayload, absl::Cord("1"));
  return s;
}

absl::Status CheckpointOfAnotherModel(absl::Status status) {
  status.SetPayload(kAnotherModelPayload, absl::Cord("1"));
  return status;
}

bool IsCheckpointOfAnotherModel(const absl::Status& status) {
  return status.GetPayload(kAnotherModelPayload).has_value();
}

}  // namespace ringmaster::trainer
