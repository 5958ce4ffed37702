#include "jobspec/bert_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_limits.h"

namespace ringmaster::trainer {

namespace {

// Upper limits on the model's dimensions. Well above every BERT published (large: 1024 hidden,
// 24 layers, 4096 intermediate; the largest vocabularies ~250k), low enough that a typo or a
// hostile job (hidden_size: 1048576) is refused with its key named instead of every rank dying
// of std::bad_alloc. The memory a whole model needs is checked separately (model_memory.h).
constexpr int kMaxVocabSize = 1 << 20;
constexpr int kMaxHiddenSize = 16384;
constexpr int kMaxHiddenLayers = 256;
constexpr int kMaxAttentionHeads = 256;
constexpr int kMaxIntermediateSize = 65536;
constexpr int kMaxPositionEmbeddings = 8192;  // = the most data.max_seq_len allows
constexpr int kMaxTypeVocabSize = 1024;
constexpr int kMaxNumLabels = 65536;

absl::Status ConfigError(absl::string_view source, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", msg));
}

absl::Status CheckPositive(absl::string_view source, const char* field, int v) {
  if (v <= 0) return ConfigError(source, absl::StrCat(field, " must be positive, got ", v));
  return absl::OkStatus();
}

// `field` of at most `limit` (the kMax* constants of bert_config.h).
absl::Status CheckAtMost(absl::string_view source, const char* field, int v, int limit) {
  if (v > limit) {
    return ConfigError(source, absl::StrCat(field, " ", v, " is over the limit of ", limit));
  }
  return absl::OkStatus();
}

absl::Status CheckProb(absl::string_view source, const char* field, float v) {
  // Written so that NaN fails too.
  if (!(v >= 0.0f && v < 1.0f)) {
    return ConfigError(source, absl::StrCat(field, " must be in [0, 1), got ", v));
  }
  return absl::OkStatus();
}

// A float as the shortest decimal that reads back to the same float, so that config.json says
// 0.1 rather than 0.10000000149011612 (nlohmann stores doubles).
double FloatForJson(float f) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// Reads optional field `name` into `out` if present; wrong types are errors naming the field.
absl::Status GetInt(const nlohmann::json& j, const char* name, absl::string_view source, int* out,
                    bool required) {
  auto it = j.find(name);
  if (it == j.end()) {
    if (required) return ConfigError(source, absl::StrCat("missing required field '", name, "'"));
    return absl::OkStatus();
  }
  if (!it->is_number_integer()) {
    return ConfigError(
        source, absl::StrCat("field '", name, "' must be an integer, got ", JsonExcerpt(*it)));
  }
  if (it->is_number_unsigned() ? it->get<uint64_t>() > std::numeric_limits<int>::max()
                               : (it->get<int64_t>() < std::numeric_limits<int>::min() ||
                                  it->get<int64_t>() > std::numeric_limits<int>::max())) {
    return ConfigError(source,
                       absl::StrCat("field '", name, "' is out of range: ", JsonExcerpt(*it)));
  }
  *out = it->get<int>();
  return absl::OkStatus();
}

absl::Status GetFloat(const nlohmann::json& j, const char* name, absl::string_view source,
                      float* out) {
  auto it = j.find(name);
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_number()) {
    return ConfigError(source,
                       absl::StrCat("field '", name, "' must be a number, got ", JsonExcerpt(*it)));
  }
  *out = static_cast<float>(it->get<double>());
  return absl::OkStatus();
}

absl::Status GetString(const nlohmann::json& j, const char* name, absl::string_view source,
                       std::string* out) {
  auto it = j.find(name);
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_string()) {
    return ConfigError(source,
                       absl::StrCat("field '", name, "' must be a string, got ", JsonExcerpt(*it)));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateBertConfig(const BertConfig& c, std::string_view source_sv) {
  const absl::string_view source(source_sv.data(), source_sv.size());
  if (auto s = CheckPositive(source, "vocab_size", c.vocab_size); !s.ok()) return s;
  if (auto s = CheckPositive(source, "hidden_size", c.hidden_size); !s.ok()) return s;
  if (auto s = CheckPositive(source, "num_hidden_layers", c.num_hidden_layers); !s.ok()) return s;
  if (auto s = CheckPositive(source, "num_attention_heads", c.num_attention_heads); !s.ok()) {
    return s;
  }
  if (auto s = CheckPositive(source, "intermediate_size", c.intermediate_size); !s.ok()) return s;
  if (auto s = CheckPositive(source, "max_position_embeddings", c.max_position_embeddings);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckPositive(source, "type_vocab_size", c.type_vocab_size); !s.ok()) return s;
  const struct {
    const char* field;
    int value;
    int limit;
  } limits[] = {
      {"vocab_size", c.vocab_size, kMaxVocabSize},
      {"hidden_size", c.hidden_size, kMaxHiddenSize},
      {"num_hidden_layers", c.num_hidden_layers, kMaxHiddenLayers},
      {"num_attention_heads", c.num_attention_heads, kMaxAttentionHeads},
      {"intermediate_size", c.intermediate_size, kMaxIntermediateSize},
      {"max_position_embeddings", c.max_position_embeddings, kMaxPositionEmbeddings},
      {"type_vocab_size", c.type_vocab_size, kMaxTypeVocabSize},
      {"num_labels", c.num_labels, kMaxNumLabels},
  };
  for (const auto& l : limits) {
    if (auto s = CheckAtMost(source, l.field, l.value, l.limit); !s.ok()) return s;
  }
  if (c.hidden_size % c.num_attention_heads != 0) {
    return ConfigError(
        source, absl::StrCat("hidden_size ", c.hidden_size,
                             " is not a multiple of num_attention_heads ", c.num_attention_heads));
  }
  if (auto s = CheckProb(source, "hidden_dropout_prob", c.hidden_dropout_prob); !s.ok()) return s;
  if (auto s = CheckProb(source, "attention_probs_dropout_prob", c.attention_probs_dropout_prob);
      !s.ok()) {
    return s;
  }
  if (!(c.layer_norm_eps > 0.0f && std::isfinite(c.layer_norm_eps))) {
    return ConfigError(source, absl::StrCat("layer_norm_eps must be > 0, got ", c.layer_norm_eps));
  }
  if (!(c.initializer_range >= 0.0f && std::isfinite(c.initializer_range))) {
    return ConfigError(source,
                       absl::StrCat("initializer_range must be >= 0, got ", c.initializer_range));
  }
  if (c.hidden_act != "gelu") {
    return ConfigError(source, absl::StrCat("hidden_act '", c.hidden_act,
                                            "' is not supported; only exact (erf) \"gelu\" is"));
  }
  if (c.num_labels < 1) {
    return ConfigError(source, absl::StrCat("num_labels must be >= 1, got ", c.num_labels));
  }
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size) {
    return ConfigError(source, absl::StrCat("pad_token_id ", c.pad_token_id, " is outside [0, ",
                                            c.vocab_size, ")"));
  }
  if (!c.id2label.empty() && c.id2label.size() != static_cast<size_t>(c.num_labels)) {
    return ConfigError(source, absl::StrCat("id2label has ", c.id2label.size(),
                                            " entries but num_labels is ", c.num_labels));
  }
  return absl::OkStatus();
}

absl::StatusOr<BertConfig> ParseBertConfigJson(std::string_view json, std::string_view source_sv) {
  // absl::string_view, not std::string_view: this absl is built without the std alias.
  const absl::string_view source(source_sv.data(), source_sv.size());
  nlohmann::json j;
  if (absl::Status s = CheckJsonDepth(json, "invalid JSON"); !s.ok()) {
    return ConfigError(source, s.message());
  }
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    return ConfigError(source, absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!j.is_object()) return ConfigError(source, "config is not a JSON object");

  // Fields that change the architecture in ways this model does not implement: refusing them
  // beats silently computing something else.
  if (auto it = j.find("model_type"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>() != "bert") {
      return ConfigError(source, absl::StrCat("model_type ", JsonExcerpt(*it),
                                              " is not supported; only \"bert\" is"));
    }
  }
  if (auto it = j.find("position_embedding_type"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "absolute") {
      return ConfigError(source, absl::StrCat("position_embedding_type ", JsonExcerpt(*it),
                                              " is not supported; only \"absolute\" is"));
    }
  }

  BertConfig c;
  auto status = [&]() -> absl::Status {
    for (auto [name, field] :
         {std::pair{"vocab_size", &c.vocab_size}, std::pair{"hidden_size", &c.hidden_size},
          std::pair{"num_hidden_layers", &c.num_hidden_layers},
          std::pair{"num_attention_heads", &c.num_attention_heads},
          std::pair{"intermediate_size", &c.intermediate_size}}) {
      if (auto s = GetInt(j, name, source, field, /*required=*/true); !s.ok()) return s;
    }
    for (auto [name, field] : {std::pair{"max_position_embeddings", &c.max_position_embeddings},
                               std::pair{"type_vocab_size", &c.type_vocab_size},
                               std::pair{"pad_token_id", &c.pad_token_id}}) {
      if (auto s = GetInt(j, name, source, field, /*required=*/false); !s.ok()) return s;
    }
    for (auto [name, field] :
         {std::pair{"hidden_dropout_prob", &c.hidden_dropout_prob},
          std::pair{"attention_probs_dropout_prob", &c.attention_probs_dropout_prob},
          std::pair{"layer_norm_eps", &c.layer_norm_eps},
          std::pair{"initializer_range", &c.initializer_range}}) {
      if (auto s = GetFloat(j, name, source, field); !s.ok()) return s;
    }
    return GetString(j, "hidden_act", source, &c.hidden_act);
  }();
  if (!status.ok()) return status;

  if (auto it = j.find("id2label"); it != j.end()) {
    if (!it->is_object()) {
      return ConfigError(
          source, absl::StrCat("field 'id2label' must be an object, got ", JsonExcerpt(*it)));
    }
    const size_t n = it->size();
    std::vector<std::string> labels(n);
    std::vector<bool> seen(n, false);
    for (auto e = it->begin(); e != it->end(); ++e) {
      size_t id = 0;
      // Keys must be exactly "0".."n-1" (no sign, no leading zeros) so the mapping is a vector.
      const std::string& key = e.key();
      const bool canonical = !key.empty() && (key == "0" || key[0] != '0') &&
                             key.find_first_not_of("0123456789") == std::string::npos &&
                             absl::SimpleAtoi(key, &id) && id < n;
      if (!canonical || seen[id]) {
        return ConfigError(source, absl::StrCat("field 'id2label' key '", key,
                                                "' is not one of \"0\"..\"", n - 1, "\""));
      }
      if (!e.value().is_string()) {
        return ConfigError(
            source, absl::StrCat("field 'id2label' value for '", key, "' must be a string, got ",
                                 JsonExcerpt(e.value())));
      }
      seen[id] = true;
      labels[id] = e.value().get<std::string>();
    }
    c.id2label = std::move(labels);
  }
  if (j.contains("num_labels")) {
    if (auto s = GetInt(j, "num_labels", source, &c.num_labels, false); !s.ok()) return s;
    // An explicit num_labels wins; label names that do not fit it are dropped.
    if (!c.id2label.empty() && c.id2label.size() != static_cast<size_t>(c.num_labels)) {
      c.id2label.clear();
    }
  } else if (!c.id2label.empty()) {
    c.num_labels = static_cast<int>(c.id2label.size());
  } else {
    c.num_labels = 2;
  }
  if (auto s = ValidateBertConfig(c, source_sv); !s.ok()) return s;
  return c;
}

std::string BertConfigToJson(const BertConfig& c) {
  // ordered_json keeps this order (architectures and model_type first, for people reading it).
  nlohmann::ordered_json j;
  j["architectures"] = {"BertForSequenceClassification"};
  j["model_type"] = "bert";
  j["attention_probs_dropout_prob"] = FloatForJson(c.attention_probs_dropout_prob);
  j["classifier_dropout"] = nullptr;
  j["hidden_act"] = c.hidden_act;
  j["hidden_dropout_prob"] = FloatForJson(c.hidden_dropout_prob);
  j["hidden_size"] = c.hidden_size;
  nlohmann::ordered_json id2label = nlohmann::ordered_json::object();
  nlohmann::ordered_json label2id = nlohmann::ordered_json::object();
  for (int i = 0; i < c.num_labels; ++i) {
    const std::string name =
        static_cast<size_t>(i) < c.id2label.size() ? c.id2label[i] : absl::StrCat("LABEL_", i);
    id2label[std::to_string(i)] = name;
    // Label names should be unique; if not, the first id keeps the name.
    if (!label2id.contains(name)) label2id[name] = i;
  }
  j["id2label"] = std::move(id2label);
  j["initializer_range"] = FloatForJson(c.initializer_range);
  j["intermediate_size"] = c.intermediate_size;
  j["label2id"] = std::move(label2id);
  j["layer_norm_eps"] = FloatForJson(c.layer_norm_eps);
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_labels"] = c.num_labels;
  j["pad_token_id"] = c.pad_token_id;
  j["position_embedding_type"] = "absolute";
  j["problem_type"] = c.num_labels == 1 ? "regression" : "single_label_classification";
  j["torch_dtype"] = "float32";
  j["type_vocab_size"] = c.type_vocab_size;
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  // `replace` rather than throwing on label names that are not valid UTF-8.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace ringmaster::trainer
