#include "jobspec/job_spec.h"

#include <sys/stat.h>
#include <unistd.h>

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
#include "jobspec/job_spec_checks.h"
#include "jobspec/key_suggestion.h"
#include "jobspec/model_memory.h"
#include "jobspec/yaml_limits.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::trainer {
namespace {

using job_spec_internal::Errors;
using job_spec_internal::KeySet;
using job_spec_internal::Marks;
using job_spec_internal::Validate;
using job_spec_internal::ValidMark;
using job_spec_internal::ValidName;

std::string JoinPath(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

// How a value looks, for "expected X, got Y".
std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", n.Scalar(), "'");
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// --- scalar conversions; each returns nullopt after reporting the problem ---

struct Value {
  const YAML::Node& node;
  const YAML::Mark& mark;  // the value's position (or its key's when the value has none)
  const std::string& path;
  Errors& errors;

  void TypeError(absl::string_view expected) const {
    errors.Add(&mark, absl::StrCat(path, ": expected ", expected, ", got ", Describe(node)));
    errors.NoteReported(path);
  }
};

std::optional<std::string> ToString(const Value& v) {
  if (!v.node.IsScalar()) {
    v.TypeError("a string");
    return std::nullopt;
  }
  return v.node.Scalar();
}

std::optional<double> ToDouble(const Value& v) {
  double d = 0;
  if (!v.node.IsScalar() || !absl::SimpleAtod(v.node.Scalar(), &d) || !std::isfinite(d)) {
    v.TypeError("a number");
    return std::nullopt;
  }
  return d;
}

std::optional<float> ToFloat(const Value& v) {
  float f = 0;
  // Parsed as float directly (not via double) so that shortest float text round-trips exactly.
  if (!v.node.IsScalar() || !absl::SimpleAtof(v.node.Scalar(), &f) || !std::isfinite(f)) {
    v.TypeError("a number");
    return std::nullopt;
  }
  return f;
}

std::optional<int64_t> ToInt64(const Value& v) {
  if (v.node.IsScalar()) {
    int64_t i = 0;
    if (absl::SimpleAtoi(v.node.Scalar(), &i)) return i;
    // `max_steps: 1e4` is an integer written as a number; accept it when exact.
    double d = 0;
    if (absl::SimpleAtod(v.node.Scalar(), &d) && std::isfinite(d) && d == std::floor(d) &&
        std::fabs(d) <= 9007199254740992.0) {
      return static_cast<int64_t>(d);
    }
  }
  v.TypeError("an integer");
  return std::nullopt;
}

std::optional<int> ToInt(const Value& v) {
  std::optional<int64_t> i = ToInt64(v);
  if (!i) return std::nullopt;
  if (*i < std::numeric_limits<int>::min() || *i > std::numeric_limits<int>::max()) {
    v.errors.Add(&v.mark, absl::StrCat(v.path, ": ", *i, " is out of range"));
    v.errors.NoteReported(v.path);
    return std::nullopt;
  }
  return static_cast<int>(*i);
}

std::optional<uint64_t> ToUint64(const Value& v) {
  uint64_t u = 0;
  if (!v.node.IsScalar() || !absl::SimpleAtoi(v.node.Scalar(), &u)) {
    v.TypeError("a non-negative integer");
    return std::nullopt;
  }
  return u;
}

std::optional<bool> ToBool(const Value& v) {
  if (v.node.IsScalar()) {
    std::string s = absl::AsciiStrToLower(v.node.Scalar());
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  v.TypeError("true or false");
  return std::nullopt;
}

// One mapping of the document: remembers which keys were read so the rest can be reported as
// unknown, and reports duplicated keys, which yaml-cpp keeps without complaint (and lookups
// would silently pick one of).
class MapReader {
 public:
  // `asked` (may be null) collects the path of every key the parser looks up, written or not:
  // the parser's own list of the keys it knows (JobSpecKnownKeys).
  MapReader(const YAML::Node& node, std::string path, const YAML::Mark& mark, Errors& errors,
            Marks& marks, KeySet* asked = nullptr)
      : path_(std::move(path)), errors_(errors), marks_(marks), asked_(asked) {
    // A section written with nothing under it (every line commented out) reads as empty.
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      std::string what = path_.empty() ? "the job spec" : path_;
      errors_.Add(&mark, absl::StrCat(what, ": expected a mapping of keys, got ", Describe(node)));
      errors_.NoteReported(path_);
      return;
    }
    for (auto it = node.begin(); it != node.end(); ++it) {
      // A copy, not a reference: yaml-cpp's iterator hands out a temporary key/value pair, so
      // a reference to it->first dangles once this statement ends (found by job_spec_fuzz).
      const YAML::Node key = it->first;
      const YAML::Mark key_mark = key.Mark();
      if (!key.IsScalar()) {
        errors_.Add(&key_mark, absl::StrCat(path_.empty() ? "top level" : path_,
                                            ": keys must be plain names, got ", Describe(key)));
        continue;
      }
      const std::string& name = key.Scalar();
      auto [pos, inserted] = index_.emplace(name, entries_.size());
      if (!inserted) {
        const Entry& first = entries_[pos->second];
        errors_.Add(&key_mark, absl::StrCat("duplicate key '", JoinPath(path_, name),
                                            "' (first set on line ", first.key_mark.line + 1, ")"));
        continue;
      }
      YAML::Mark value_mark = it->second.Mark();
      if (!ValidMark(value_mark)) value_mark = key_mark;
      entries_.push_back(Entry{name, key_mark, value_mark, it->second, false});
    }
  }

  const std::string& path() const { return path_; }
  KeySet* asked() const { return asked_; }

  // The value under `key`, marking it known; nullptr when absent.
  const YAML::Node* Take(absl::string_view key, const YAML::Mark** mark = nullptr) {
    if (asked_ != nullptr) asked_->insert(JoinPath(path_, key));
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    Entry& e = entries_[it->second];
    e.used = true;
    marks_[JoinPath(path_, key)] = e.value_mark;
    if (mark != nullptr) *mark = &e.value_mark;
    return &e.value;
  }

  // Reads `key` into `*out` when present; conversion errors are reported.
  template <typename T, typename Conv>
  void Get(absl::string_view key, T* out, Conv conv) {
    const YAML::Mark* mark = nullptr;
    const YAML::Node* node = Take(key, &mark);
    if (node == nullptr) return;
    std::string path = JoinPath(path_, key);
    if (auto v = conv(Value{*node, *mark, path, errors_})) *out = *v;
  }

  // Every key not taken is a typo or a misplaced option.
  // `hints` pairs a likely mistaken key with advice.
  void ReportUnknown(
      std::initializer_list<std::pair<absl::string_view, absl::string_view>> hints = {}) {
    for (const Entry& e : entries_) {
      if (e.used) continue;
      const std::string path = JoinPath(path_, e.key);
      std::string msg = absl::StrCat("unknown key '", path, "'");
      bool hinted = false;
      for (const auto& [key, hint] : hints) {
        if (e.key == key) {
          absl::StrAppend(&msg, " (", hint, ")");
          hinted = true;
        }
      }
      if (!hinted) {
        // Function-local static: taking the known keys parses a spec with no unknown key, so
        // this is never reached from inside its own initialisation.
        static const std::vector<std::string> known = JobSpecKnownKeys();
        if (std::optional<std::string> near = jobspec::SuggestJobKey(path, known)) {
          absl::StrAppend(&msg, "; did you mean '", *near, "'?");
        }
      }
      errors_.Add(&e.key_mark, msg);
    }
  }

 private:
  struct Entry {
    std::string key;
    YAML::Mark key_mark;
    YAML::Mark value_mark;
    YAML::Node value;
    bool used;
  };
  std::string path_;
  Errors& errors_;
  Marks& marks_;
  KeySet* asked_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

// A sub-section reader, or an empty one when the section is absent.
MapReader Section(MapReader& parent, absl::string_view key, Errors& errors, Marks& marks) {
  static const YAML::Node kAbsent;  // Null: reads as an empty section
  const YAML::Mark* mark = nullptr;
  const YAML::Node* node = parent.Take(key, &mark);
  static const YAML::Mark kNoMark = YAML::Mark::null_mark();
  return MapReader(node != nullptr ? *node : kAbsent, JoinPath(parent.path(), key),
                   node != nullptr ? *mark : kNoMark, errors, marks, parent.asked());
}

void ParseModelConfig(const YAML::Node& node, const YAML::Mark& mark, ModelSpec& model,
                      Errors& errors, Marks& marks, KeySet* asked) {
  MapReader m(node, "model.config", mark, errors, marks, asked);
  BertConfig& c = model.config;
  // Not written = taken from the vocab file by the caller; see ModelSpec::config.
  c.vocab_size = 0;
  m.Get("vocab_size", &c.vocab_size, ToInt);
  // Architecture sizes have no sensible default for a model built from scratch; requiring them
  // keeps a forgotten line from quietly training a BERT-base.
  for (absl::string_view required :
       {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}) {
    // An empty `config:` (null) must not pass as "all defaults"; a non-mapping is reported
    // already.
    if ((node.IsMap() || node.IsNull()) && m.Take(required) == nullptr) {
      errors.Add(&mark, absl::StrCat("model.config.", required, " is required"));
      errors.NoteReported(absl::StrCat("model.config.", required));
    }
  }
  m.Get("hidden_size", &c.hidden_size, ToInt);
  m.Get("num_hidden_layers", &c.num_hidden_layers, ToInt);
  m.Get("num_attention_heads", &c.num_attention_heads, ToInt);
  m.Get("intermediate_size", &c.intermediate_size, ToInt);
  m.Get("max_position_embeddings", &c.max_position_embeddings, ToInt);
  m.Get("type_vocab_size", &c.type_vocab_size, ToInt);
  m.Get("pad_token_id", &c.pad_token_id, ToInt);
  m.Get("hidden_dropout_prob", &c.hidden_dropout_prob, ToFloat);
  m.Get("attention_probs_dropout_prob", &c.attention_probs_dropout_prob, ToFloat);
  m.Get("layer_norm_eps", &c.layer_norm_eps, ToFloat);
  m.Get("initializer_range", &c.initializer_range, ToFloat);
  m.Get("hidden_act", &c.hidden_act, ToString);
  m.ReportUnknown({{"num_labels", "set model.num_labels instead"}});
}

// Enum-like settings whose name is not in their table: reported with the range checks after
// parsing (as they always were), so that they do not hide them; `paths` lets those checks skip
// a setting that kept its default.
struct UnknownSettings {
  Errors errors;
  std::set<std::string, std::less<>> paths;
};

// An enum-like setting (job_settings.h). A value that is not a string is a type error like any
// other; a name outside the setting's table goes to `unknown`.
template <typename E>
void GetSetting(MapReader& m, absl::string_view key, E* out, Errors& errors,
                UnknownSettings& unknown) {
  const YAML::Mark* mark = nullptr;
  const YAML::Node* node = m.Take(key, &mark);
  if (node == nullptr) return;
  const std::string path = JoinPath(m.path(), key);
  std::optional<std::string> name = ToString(Value{*node, *mark, path, errors});
  if (!name) return;
  if (std::optional<E> v = jobspec::ParseSetting<E>(*name)) {
    *out = *v;
  } else {
    unknown.errors.Add(mark, absl::StrCat(path, ": '", *name,
                                          "' is not one of: ", jobspec::AllowedSettingNames<E>()));
    unknown.paths.insert(path);
    errors.NoteReported(path);
  }
}

void ParseModel(MapReader& root, JobSpec& spec, Errors& errors, UnknownSettings& unknown,
                Marks& marks) {
  MapReader m = Section(root, "model", errors, marks);
  ModelSpec& model = spec.model;
  m.Get("init_from", &model.init_from, ToString);
  const YAML::Mark* config_mark = nullptr;
  if (const YAML::Node* config = m.Take("config", &config_mark)) {
    model.has_config = true;
    ParseModelConfig(*config, *config_mark, model, errors, marks, m.asked());
  }
  m.Get("vocab", &model.vocab, ToString);
  m.Get("do_lower_case", &model.do_lower_case, ToBool);
  GetSetting(m, "tokenizer_compat", &model.tokenizer_compat, errors, unknown);
  m.Get("num_labels", &model.num_labels, ToInt);
  model.config.num_labels = model.num_labels;
  m.Get("hidden_dropout_prob", &model.hidden_dropout_prob, ToFloat);
  m.Get("attention_probs_dropout_prob", &model.attention_probs_dropout_prob, ToFloat);
  if (model.has_config) {
    // With an inline config there is nothing to override: one value per setting, in config.
    auto fold = [&](std::optional<float>& override_value, float& config_value,
                    absl::string_view key) {
      if (!override_value) return;
      std::string config_path = absl::StrCat("model.config.", key);
      if (marks.count(config_path) > 0) {
        errors.Add(&marks[absl::StrCat("model.", key)],
                   absl::StrCat("model.", key, " and ", config_path,
                                " are both set; set it in one place"));
      }
      config_value = *override_value;
      override_value.reset();
    };
    fold(model.hidden_dropout_prob, model.config.hidden_dropout_prob, "hidden_dropout_prob");
    fold(model.attention_probs_dropout_prob, model.config.attention_probs_dropout_prob,
         "attention_probs_dropout_prob");
  }
  m.ReportUnknown();
}

std::optional<std::pair<double, double>> ToBetas(const Value& v) {
  if (!v.node.IsSequence() || v.node.size() != 2) {
    v.TypeError("a list of two numbers [beta1, beta2]");
    return std::nullopt;
  }
  std::optional<double> b[2];
  for (size_t i = 0; i < 2; ++i) {
    YAML::Node item = v.node[i];
    YAML::Mark mark = ValidMark(item.Mark()) ? item.Mark() : v.mark;
    std::string path = absl::StrCat(v.path, "[", i, "]");
    b[i] = ToDouble(Value{item, mark, path, v.errors});
  }
  if (!b[0] || !b[1]) return std::nullopt;
  return std::make_pair(*b[0], *b[1]);
}

std::optional<std::vector<std::string>> ToStringList(const Value& v) {
  if (!v.node.IsSequence()) {
    v.TypeError("a list of strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < v.node.size(); ++i) {
    YAML::Node item = v.node[i];
    YAML::Mark mark = ValidMark(item.Mark()) ? item.Mark() : v.mark;
    std::string path = absl::StrCat(v.path, "[", i, "]");
    std::optional<std::string> s = ToString(Value{item, mark, path, v.errors});
    ok = ok && s.has_value();
    if (s) out.push_back(*std::move(s));
  }
  if (!ok) return std::nullopt;
  return out;
}

void ParseData(MapReader& root, JobSpec& spec, Errors& errors, UnknownSettings& unknown,
               Marks& marks) {
  MapReader m = Section(root, "data", errors, marks);
  m.Get("train", &spec.data.train, ToString);
  m.Get("eval", &spec.data.eval, ToString);
  GetSetting(m, "format", &spec.data.format, errors, unknown);
  m.Get("text_column", &spec.data.text_column, ToString);
  m.Get("label_column", &spec.data.label_column, ToString);
  m.Get("text_pair_column", &spec.data.text_pair_column, ToString);
  m.Get("labels", &spec.data.labels, ToStringList);
  m.Get("max_seq_len", &spec.data.max_seq_len, ToInt);
  m.Get("shuffle", &spec.data.shuffle, ToBool);
  m.ReportUnknown();
}

void ParseTrain(MapReader& root, JobSpec& spec, Errors& errors, UnknownSettings& unknown,
                Marks& marks) {
  MapReader m = Section(root, "train", errors, marks);
  TrainSpec& t = spec.train;
  m.Get("epochs", &t.epochs, ToInt);
  m.Get("max_steps", &t.max_steps, ToInt64);
  m.Get("global_batch_size", &t.global_batch_size, ToInt);
  m.Get("micro_batch_size", &t.micro_batch_size, ToInt);
  m.Get("lr", &t.lr, ToDouble);
  GetSetting(m, "lr_schedule", &t.lr_schedule, errors, unknown);
  m.Get("lr_end", &t.lr_end, ToDouble);
  m.Get("lr_power", &t.lr_power, ToDouble);
  m.Get("warmup_ratio", &t.warmup_ratio, ToDouble);
  m.Get("warmup_steps", &t.warmup_steps, ToInt64);
  m.Get("weight_decay", &t.weight_decay, ToDouble);
  std::pair<double, double> betas{t.adam_beta1, t.adam_beta2};
  m.Get("adam_betas", &betas, ToBetas);
  t.adam_beta1 = betas.first;
  t.adam_beta2 = betas.second;
  m.Get("adam_eps", &t.adam_eps, ToDouble);
  m.Get("max_grad_norm", &t.max_grad_norm, ToDouble);
  GetSetting(m, "precision", &t.precision, errors, unknown);
  GetSetting(m, "device", &t.device, errors, unknown);
  m.Get("seed", &t.seed, ToUint64);
  m.Get("eval_batch_size", &t.eval_batch_size, ToInt);
  GetSetting(m, "eval_strategy", &t.eval_strategy, errors, unknown);
  m.Get("eval_steps", &t.eval_steps, ToInt64);
  m.Get("metric_for_best_model", &t.metric_for_best_model, ToString);
  // Unset means "as the metric's name says", so an explicit false is kept apart from no value.
  m.Get("greater_is_better", &t.greater_is_better,
        [](const Value& v) -> std::optional<std::optional<bool>> {
          if (std::optional<bool> b = ToBool(v)) return std::optional<bool>(*b);
          return std::nullopt;
        });
  m.Get("load_best_model_at_end", &t.load_best_model_at_end, ToBool);
  m.Get("early_stopping_patience", &t.early_stopping_patience, ToInt);
  m.Get("early_stopping_threshold", &t.early_stopping_threshold, ToDouble);
  m.Get("log_every_steps", &t.log_every_steps, ToInt64);
  m.Get("gradient_checkpointing", &t.gradient_checkpointing, ToBool);
  GetSetting(m, "resume", &t.resume, errors, unknown);
  m.ReportUnknown({{"adam_beta1", "use adam_betas: [beta1, beta2]"},
                   {"adam_beta2", "use adam_betas: [beta1, beta2]"}});
}

void ParseOutput(MapReader& root, JobSpec& spec, Errors& errors, Marks& marks) {
  MapReader m = Section(root, "output", errors, marks);
  m.Get("dir", &spec.output.dir, ToString);
  m.Get("checkpoint_every_steps", &spec.output.checkpoint_every_steps, ToInt64);
  m.Get("keep_checkpoints", &spec.output.keep_checkpoints, ToInt);
  m.Get("tensorboard", &spec.output.tensorboard, ToBool);
  m.Get("tensorboard_dir", &spec.output.tensorboard_dir, ToString);
  m.ReportUnknown();
}

// "N" or "MIN:MAX" (a plain YAML integer is fine too). Ranges are checked by validation.
std::optional<std::pair<int, int>> ToNodes(const Value& v) {
  if (v.node.IsScalar()) {
    std::vector<std::string> parts = absl::StrSplit(v.node.Scalar(), ':');
    int lo = 0, hi = 0;
    if (parts.size() == 1 && absl::SimpleAtoi(parts[0], &lo)) return std::make_pair(lo, lo);
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &lo) && absl::SimpleAtoi(parts[1], &hi)) {
      return std::make_pair(lo, hi);
    }
  }
  v.TypeError("a node count N or a range \"MIN:MAX\"");
  return std::nullopt;
}

void ParseDistributed(MapReader& root, JobSpec& spec, Errors& errors, UnknownSettings& unknown,
                      Marks& marks) {
  MapReader m = Section(root, "distributed", errors, marks);
  DistributedSpec& d = spec.distributed;
  std::pair<int, int> nodes{d.min_nodes, d.max_nodes};
  m.Get("nodes", &nodes, ToNodes);
  d.min_nodes = nodes.first;
  d.max_nodes = nodes.second;
  m.Get("procs_per_node", &d.procs_per_node, ToString);
  GetSetting(m, "sharding", &d.sharding, errors, unknown);
  GetSetting(m, "compression", &d.compression, errors, unknown);
  m.Get("powersgd_rank", &d.powersgd_rank, ToInt);
  m.Get("powersgd_start_step", &d.powersgd_start_step, ToInt64);
  m.Get("skip_zero_blocks", &d.skip_zero_blocks, ToBool);
  m.Get("bucket_cap_mb", &d.bucket_cap_mb, ToDouble);
  GetSetting(m, "backend", &d.backend, errors, unknown);
  m.ReportUnknown();
}

void ParseRestart(MapReader& root, JobSpec& spec, Errors& errors, Marks& marks) {
  MapReader m = Section(root, "restart", errors, marks);
  m.Get("max_restarts", &spec.restart.max_restarts, ToInt);
  m.ReportUnknown();
}

// The documents of a YAML stream, found with yaml-cpp's event parser instead of LoadAll:
// yaml-cpp 0.7's LoadAll loops forever, allocating, on a stream its parser cannot advance past
// (a lone "," yields the same empty document again and again; jbeder/yaml-cpp#1040, found by
// job_spec_fuzz). A document that starts where the previous one started means the parser is
// stuck there, which is reported as invalid YAML. Counting stops after three documents.
class DocumentScanner final : public YAML::EventHandler {
 public:
  struct Document {
    YAML::Mark start;  // the document's first token
    YAML::Mark node;   // its first node
  };

  // Throws YAML::Exception on a syntax error, as Load does.
  static std::vector<Document> Scan(const std::string& text, std::optional<YAML::Mark>* stuck_at) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentScanner scanner;
    while (scanner.docs_.size() < 3 && parser.HandleNextDocument(scanner)) {
      const size_t n = scanner.docs_.size();
      if (n >= 2 && scanner.docs_[n - 1].start.pos == scanner.docs_[n - 2].start.pos) {
        *stuck_at = scanner.docs_[n - 1].start;
        break;
      }
    }
    return scanner.docs_;
  }

  void OnDocumentStart(const YAML::Mark& mark) override {
    docs_.push_back({mark, mark});
    first_node_ = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Node(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Node(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(mark);
  }
  void OnMapEnd() override {}

 private:
  void Node(const YAML::Mark& mark) {
    if (first_node_ && !docs_.empty()) docs_.back().node = mark;
    first_node_ = false;
  }

  std::vector<Document> docs_;
  bool first_node_ = false;
};

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// ParseJobSpec; `asked` (may be null) collects every key path the parser looks up.
absl::StatusOr<JobSpec> ParseJobSpecImpl(std::string_view yaml_text, std::string_view source,
                                         std::string_view base_dir, KeySet* asked) {
  JobSpec spec;
  spec.source = std::string(source);
  Errors errors(spec.source);

  const std::string text(yaml_text);
  std::vector<DocumentScanner::Document> docs;
  YAML::Node doc;
  try {
    std::optional<YAML::Mark> stuck_at;
    docs = DocumentScanner::Scan(text, &stuck_at);
    if (stuck_at) {
      errors.Add(&*stuck_at, "invalid YAML: unexpected character");
      return errors.ToStatus();
    }
    // Aliases are counted by the bytes they stand for before anything copies them (issue #31).
    if (std::optional<YamlExpansionOverLimit> over =
            docs.empty() ? std::nullopt : FindYamlExpansionOverLimit(text)) {
      errors.Add(&over->mark,
                 absl::StrCat("YAML aliases expand the job spec to more than ",
                              kMaxYamlExpandedBytes, " bytes (", over->expanded,
                              " counted by here, each alias by the size of the node it "
                              "repeats); refused"));
      return errors.ToStatus();
    }
    if (!docs.empty()) doc = YAML::Load(text);  // the first document only
  } catch (const YAML::Exception& e) {
    errors.Add(&e.mark, absl::StrCat("invalid YAML: ", e.msg));
    return errors.ToStatus();
  }
  if (docs.empty() || doc.IsNull()) {
    errors.Add(nullptr, "the job spec is empty");
    return errors.ToStatus();
  }
  if (docs.size() > 1) {
    errors.Add(&docs[1].node, "more than one YAML document ('---'); a job file holds one job");
  }

  Marks marks;
  UnknownSettings unknown_settings{Errors(spec.source), {}};
  MapReader root(doc, "", doc.Mark(), errors, marks, asked);
  root.Get("name", &spec.name, ToString);
  ParseModel(root, spec, errors, unknown_settings, marks);
  ParseData(root, spec, errors, unknown_settings, marks);
  ParseTrain(root, spec, errors, unknown_settings, marks);
  ParseOutput(root, spec, errors, marks);
  ParseDistributed(root, spec, errors, unknown_settings, marks);
  ParseRestart(root, spec, errors, marks);
  root.ReportUnknown();
  // A document that is not a mapping has no settings to check.
  if (!doc.IsMap()) return errors.ToStatus();
  // Every mistake in one pass: unknown keys and unreadable values (above) together with the
  // range and consistency checks below, which skip the values already reported.

  ModelSpec& m = spec.model;
  const std::string base(base_dir);
  m.init_from = Resolve(m.init_from, base);
  m.vocab = Resolve(m.vocab, base);
  spec.data.train = Resolve(spec.data.train, base);
  spec.data.eval = Resolve(spec.data.eval, base);
  spec.output.dir = Resolve(spec.output.dir, base);
  spec.output.tensorboard_dir = Resolve(spec.output.tensorboard_dir, base);

  errors.Append(unknown_settings.errors);
  Validate(spec, &marks, &unknown_settings.paths, errors);
  RM_RETURN_IF_ERROR(errors.ToStatus());
  return spec;
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(std::string_view yaml_text, std::string_view source,
                                     std::string_view base_dir) {
  return ParseJobSpecImpl(yaml_text, source, base_dir, nullptr);
}

std::vector<std::string> JobSpecKnownKeys() {
  KeySet asked;
  // Every key is looked up whether written or not, except model.config's, which are read only
  // when model.config is written: an empty one is enough. The spec itself is incomplete (its
  // errors are not the point).
  (void)ParseJobSpecImpl("model:\n  config: {}\n", "known keys", "", &asked);
  return {asked.begin(), asked.end()};
}

absl::Status JobFileTooLarge(std::string_view name, size_t bytes) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": ", bytes,
                                                 " bytes; a job file may have at most ",
                                                 kMaxJobFileBytes, " bytes (256 KiB)"));
}

absl::StatusOr<std::string> ReadJobFile(const std::string& path) {
  // The size is checked on the opened file first, so that the refusal says how large it is.
  RM_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (stated && static_cast<size_t>(st.st_size) > kMaxJobFileBytes) {
    return JobFileTooLarge(path, static_cast<size_t>(st.st_size));
  }
  // A file that grew since is still refused by ReadFile's own limit.
  return ReadFile(path, kMaxJobFileBytes);
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path) {
  RM_ASSIGN_OR_RETURN(std::string text, ReadJobFile(path));
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot make absolute: ", ec.message()));
  }
  return ParseJobSpec(text, path, abs.parent_path().string());
}

absl::Status ValidateJobSpec(const JobSpec& spec) {
  Errors errors(spec.source.empty() ? "job spec" : spec.source);
  Validate(spec, nullptr, nullptr, errors);
  return errors.ToStatus();
}

}  // namespace ringmaster::trainer
