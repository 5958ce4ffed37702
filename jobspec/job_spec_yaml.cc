// JobSpecToYaml: writes a JobSpec back as YAML that ParseJobSpec reads to the same spec (used to
// record the resolved job in a run directory).
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "jobspec/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::trainer {
namespace {

bool IsOneOf(absl::string_view v, const std::vector<absl::string_view>& allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}
// --- emitting ---

template <typename T>
std::string ShortestText(T v) {
  // Shortest text that parses back to the same value, so the recorded spec is exact and clean.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return absl::StrCat(v);
  return std::string(buf, end);
}

// Plain scalars only where YAML cannot read them as anything else; quoted otherwise.
void EmitString(YAML::Emitter& out, const std::string& s) {
  static const std::vector<absl::string_view> kReserved = {"null", "true", "false", "yes", "no",
                                                           "on",   "off",  "y",     "n",   "~"};
  bool plain =
      !s.empty() && (absl::ascii_isalpha(s[0]) || s[0] == '/' || s[0] == '_') &&
      std::all_of(s.begin(), s.end(),
                  [](char c) {
                    return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' || c == '/';
                  }) &&
      !IsOneOf(absl::AsciiStrToLower(s), kReserved);
  if (plain) {
    out << s;
  } else {
    out << YAML::DoubleQuoted << s;
  }
}

void Key(YAML::Emitter& out, absl::string_view key) { out << YAML::Key << std::string(key); }

void KeyString(YAML::Emitter& out, absl::string_view key, const std::string& v) {
  Key(out, key);
  out << YAML::Value;
  EmitString(out, v);
}

template <typename T>
void KeyNumber(YAML::Emitter& out, absl::string_view key, T v) {
  Key(out, key);
  out << YAML::Value << ShortestText(v);
}

void KeyBool(YAML::Emitter& out, absl::string_view key, bool v) {
  Key(out, key);
  out << YAML::Value << (v ? "true" : "false");
}

}  // namespace

std::string JobSpecToYaml(const JobSpec& s) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  KeyString(out, "name", s.name);

  Key(out, "model");
  out << YAML::Value << YAML::BeginMap;
  const ModelSpec& m = s.model;
  if (!m.init_from.empty()) KeyString(out, "init_from", m.init_from);
  if (m.has_config) {
    const BertConfig& c = m.config;
    Key(out, "config");
    out << YAML::Value << YAML::BeginMap;
    if (c.vocab_size != 0) KeyNumber(out, "vocab_size", c.vocab_size);
    KeyNumber(out, "hidden_size", c.hidden_size);
    KeyNumber(out, "num_hidden_layers", c.num_hidden_layers);
    KeyNumber(out, "num_attention_heads", c.num_attention_heads);
    KeyNumber(out, "intermediate_size", c.intermediate_size);
    KeyNumber(out, "max_position_embeddings", c.max_position_embeddings);
    KeyNumber(out, "type_vocab_size", c.type_vocab_size);
    KeyNumber(out, "pad_token_id", c.pad_token_id);
    KeyNumber(out, "hidden_dropout_prob", c.hidden_dropout_prob);
    KeyNumber(out, "attention_probs_dropout_prob", c.attention_probs_dropout_prob);
    KeyNumber(out, "layer_norm_eps", c.layer_norm_eps);
    KeyNumber(out, "initializer_range", c.initializer_range);
    KeyString(out, "hidden_act", c.hidden_act);
    out << YAML::EndMap;
    KeyString(out, "vocab", m.vocab);
  } else if (!m.vocab.empty()) {
    KeyString(out, "vocab", m.vocab);  // invalid, but written as-is rather than dropped
  }
  KeyBool(out, "do_lower_case", m.do_lower_case);
  KeyString(out, "tokenizer_compat", std::string(SettingName(m.tokenizer_compat)));
  KeyNumber(out, "num_labels", m.num_labels);
  if (m.hidden_dropout_prob) KeyNumber(out, "hidden_dropout_prob", *m.hidden_dropout_prob);
  if (m.attention_probs_dropout_prob) {
    KeyNumber(out, "attention_probs_dropout_prob", *m.attention_probs_dropout_prob);
  }
  out << YAML::EndMap;

  Key(out, "data");
  out << YAML::Value << YAML::BeginMap;
  KeyString(out, "train", s.data.train);
  if (!s.data.eval.empty()) KeyString(out, "eval", s.data.eval);
  KeyString(out, "format", std::string(SettingName(s.data.format)));
  KeyString(out, "text_column", s.data.text_column);
  KeyString(out, "label_column", s.data.label_column);
  if (!s.data.text_pair_column.empty()) KeyString(out, "text_pair_column", s.data.text_pair_column);
  if (!s.data.labels.empty()) {
    Key(out, "labels");
    out << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& name : s.data.labels) out << YAML::DoubleQuoted << name;
    out << YAML::EndSeq;
  }
  KeyNumber(out, "max_seq_len", s.data.max_seq_len);
  KeyBool(out, "shuffle", s.data.shuffle);
  out << YAML::EndMap;

  const TrainSpec& t = s.train;
  Key(out, "train");
  out << YAML::Value << YAML::BeginMap;
  KeyNumber(out, "epochs", t.epochs);
  KeyNumber(out, "max_steps", t.max_steps);
  KeyNumber(out, "global_batch_size", t.global_batch_size);
  KeyNumber(out, "micro_batch_size", t.micro_batch_size);
  KeyNumber(out, "lr", t.lr);
  KeyString(out, "lr_schedule", std::string(SettingName(t.lr_schedule)));
  KeyNumber(out, "lr_end", t.lr_end);
  KeyNumber(out, "lr_power", t.lr_power);
  KeyNumber(out, "warmup_ratio", t.warmup_ratio);
  KeyNumber(out, "warmup_steps", t.warmup_steps);
  KeyNumber(out, "weight_decay", t.weight_decay);
  Key(out, "adam_betas");
  out << YAML::Value << YAML::Flow << YAML::BeginSeq << ShortestText(t.adam_beta1)
      << ShortestText(t.adam_beta2) << YAML::EndSeq;
  KeyNumber(out, "adam_eps", t.adam_eps);
  KeyNumber(out, "max_grad_norm", t.max_grad_norm);
  KeyString(out, "precision", std::string(SettingName(t.precision)));
  KeyString(out, "device", std::string(SettingName(t.device)));
  KeyNumber(out, "seed", t.seed);
  KeyNumber(out, "eval_batch_size", t.eval_batch_size);
  KeyString(out, "eval_strategy", std::string(SettingName(t.eval_strategy)));
  KeyNumber(out, "eval_steps", t.eval_steps);
  if (!t.metric_for_best_model.empty()) {
    KeyString(out, "metric_for_best_model", t.metric_for_best_model);
  }
  if (t.greater_is_better) KeyBool(out, "greater_is_better", *t.greater_is_better);
  KeyBool(out, "load_best_model_at_end", t.load_best_model_at_end);
  KeyNumber(out, "early_stopping_patience", t.early_stopping_patience);
  KeyNumber(out, "early_stopping_threshold", t.early_stopping_threshold);
  KeyNumber(out, "log_every_steps", t.log_every_steps);
  KeyBool(out, "gradient_checkpointing", t.gradient_checkpointing);
  KeyString(out, "resume", std::string(SettingName(t.resume)));
  out << YAML::EndMap;

  Key(out, "output");
  out << YAML::Value << YAML::BeginMap;
  KeyString(out, "dir", s.output.dir);
  KeyNumber(out, "checkpoint_every_steps", s.output.checkpoint_every_steps);
  KeyNumber(out, "keep_checkpoints", s.output.keep_checkpoints);
  KeyBool(out, "tensorboard", s.output.tensorboard);
  if (!s.output.tensorboard_dir.empty()) {
    KeyString(out, "tensorboard_dir", s.output.tensorboard_dir);
  }
  out << YAML::EndMap;

  const DistributedSpec& d = s.distributed;
  Key(out, "distributed");
  out << YAML::Value << YAML::BeginMap;
  Key(out, "nodes");
  out << YAML::Value << YAML::DoubleQuoted
      << (d.min_nodes == d.max_nodes ? absl::StrCat(d.min_nodes)
                                     : absl::StrCat(d.min_nodes, ":", d.max_nodes));
  KeyString(out, "procs_per_node", d.procs_per_node);
  KeyString(out, "sharding", std::string(SettingName(d.sharding)));
  KeyString(out, "compression", std::string(SettingName(d.compression)));
  KeyNumber(out, "powersgd_rank", d.powersgd_rank);
  KeyNumber(out, "powersgd_start_step", d.powersgd_start_step);
  KeyBool(out, "skip_zero_blocks", d.skip_zero_blocks);
  KeyNumber(out, "bucket_cap_mb", d.bucket_cap_mb);
  KeyString(out, "backend", std::string(SettingName(d.backend)));
  out << YAML::EndMap;

  Key(out, "restart");
  out << YAML::Value << YAML::BeginMap;
  KeyNumber(out, "max_restarts", s.restart.max_restarts);
  out << YAML::EndMap;

  out << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace ringmaster::trainer
