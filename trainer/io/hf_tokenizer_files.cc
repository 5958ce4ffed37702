#include "trainer/io/hf_tokenizer_files.h"

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/status_macros.h"
#include "trainer/io/model_paths.h"

namespace ringmaster::trainer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxJsonBytes = size_t{64} << 20;

// BertTokenizer's special tokens, in the order its tokenizer.json lists them.
constexpr const char* kSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// tokenizer_config.json as an object; null when absent or unreadable (every key has a default).
nlohmann::json ReadTokenizerConfig(const std::string& dir) {
  if (!CheckModelPathBeneathRoot(dir + "/tokenizer_config.json").ok()) return nullptr;
  absl::StatusOr<std::string> text = ReadFile(dir + "/tokenizer_config.json", kMaxJsonBytes);
  if (!text.ok()) return nullptr;
  absl::StatusOr<nlohmann::json> j = ParseJsonLimited(*text, dir + "/tokenizer_config.json");
  return j.ok() && j->is_object() ? *std::move(j) : nlohmann::json();
}

int ModelMaxLength(const nlohmann::json& config) {
  if (!config.is_object()) return 0;
  auto it = config.find("model_max_length");
  // transformers writes "no limit" as 1e30, which JSON readers see as a float or a huge integer.
  if (it == config.end() || !it->is_number_integer()) return 0;
  const int64_t v = it->get<int64_t>();
  return v >= 2 && v <= std::numeric_limits<int32_t>::max() ? static_cast<int>(v) : 0;
}

// tokenizer_config.json's kTokenizerCompatKey; slow when the file or the key is absent.
absl::StatusOr<jobspec::TokenizerCompat> ReadCompat(const std::string& dir,
                                                    const nlohmann::json& config) {
  if (!config.is_object()) return jobspec::TokenizerCompat::kSlow;
  auto it = config.find(kTokenizerCompatKey);
  if (it == config.end()) return jobspec::TokenizerCompat::kSlow;
  absl::StatusOr<jobspec::TokenizerCompat> v =
      it->is_string()
          ? jobspec::ParseSettingOrError<jobspec::TokenizerCompat>(it->get<std::string>())
          : absl::InvalidArgumentError(absl::StrCat(
                JsonExcerpt(*it),
                " is not one of: ", jobspec::AllowedSettingNames<jobspec::TokenizerCompat>()));
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, "/tokenizer_config.json: ", kTokenizerCompatKey, ": ", v.status().message()));
  }
  return *v;
}

absl::StatusOr<HfTokenizerSource> ReadTokenizerJson(const std::string& path,
                                                    const nlohmann::json& config) {
  RM_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxJsonBytes));
  RM_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonLimited(text, path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  auto bad = [&path](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };

  const auto model = j.find("model");
  if (model == j.end() || !model->is_object()) return bad("has no \"model\" object");
  const std::string type = model->value("type", std::string());
  if (type != "WordPiece") {
    return bad(absl::StrCat("model.type is '", type,
                            "'; only WordPiece tokenizers (BERT's) are supported"));
  }
  for (const char* key : {"unk_token", "continuing_subword_prefix", "max_input_chars_per_word"}) {
    static const nlohmann::json kBert = {{"unk_token", "[UNK]"},
                                         {"continuing_subword_prefix", "##"},
                                         {"max_input_chars_per_word", 100}};
    auto it = model->find(key);
    if (it != model->end() && !it->is_null() && *it != kBert[key]) {
      return bad(absl::StrCat("model.", key, " is ", JsonExcerpt(*it), "; only BERT's ",
                              kBert[key].dump(), " is supported"));
    }
  }
  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object() || vocab->empty()) {
    return bad("has no model.vocab (an object of token: id)");
  }
  HfTokenizerSource src;
  src.source = path;
  src.tokens.resize(vocab->size());
  std::vector<bool> seen(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab->size())) {
      return bad(absl::StrCat("model.vocab[", JsonExcerpt(nlohmann::json(token)), "] is ",
                              JsonExcerpt(id), "; ids must be 0..", vocab->size() - 1));
    }
    const size_t i = id.get<size_t>();
    if (seen[i]) return bad(absl::StrCat("model.vocab has two tokens with id ", i));
    seen[i] = true;
    src.tokens[i] = token;
  }

  const auto norm = j.find("normalizer");
  if (norm == j.end() || !norm->is_object() || norm->value("type", "") != "BertNormalizer") {
    return bad(
        "normalizer is not a BertNormalizer; only BERT's normalizer is supported (lowercase, "
        "strip_accents, handle_chinese_chars, clean_text)");
  }
  auto flag = [&](const char* key, bool def) -> absl::StatusOr<bool> {
    auto it = norm->find(key);
    if (it == norm->end()) return def;
    if (!it->is_boolean()) return bad(absl::StrCat("normalizer.", key, " is not true or false"));
    return it->get<bool>();
  };
  RM_ASSIGN_OR_RETURN(src.do_lower_case, flag("lowercase", true));
  RM_ASSIGN_OR_RETURN(const bool chinese, flag("handle_chinese_chars", true));
  RM_ASSIGN_OR_RETURN(const bool clean, flag("clean_text", true));
  auto strip = norm->find("strip_accents");
  if (strip != norm->end() && !strip->is_null() &&
      (!strip->is_boolean() || strip->get<bool>() != src.do_lower_case)) {
    return bad(absl::StrCat("normalizer.strip_accents is ", JsonExcerpt(*strip), " with lowercase ",
                            src.do_lower_case ? "true" : "false",
                            "; only strip_accents null or equal to lowercase is supported"));
  }
  if (!chinese || !clean) {
    return bad(absl::StrCat("normalizer.", chinese ? "clean_text" : "handle_chinese_chars",
                            " is false; only true is supported"));
  }
  src.model_max_length = ModelMaxLength(config);
  return src;
}

}  // namespace

absl::StatusOr<HfTokenizerSource> ReadHfTokenizer(const std::string& dir) {
  // Each file is checked before it is read: a link out of the allowed root is an error naming it.
  for (const char* name : {"tokenizer_config.json", "vocab.txt", "tokenizer.json"}) {
    RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(absl::StrCat(dir, "/", name)));
  }
  const nlohmann::json config = ReadTokenizerConfig(dir);
  RM_ASSIGN_OR_RETURN(const jobspec::TokenizerCompat compat, ReadCompat(dir, config));
  const std::string vocab_path = dir + "/vocab.txt";
  std::error_code ec;
  if (fs::exists(vocab_path, ec)) {
    HfTokenizerSource src;
    src.compat = compat;
    src.vocab_path = vocab_path;
    src.source = vocab_path;
    src.do_lower_case = true;
    if (config.is_object()) {
      auto it = config.find("do_lower_case");
      if (it != config.end() && it->is_boolean()) src.do_lower_case = it->get<bool>();
    }
    src.model_max_length = ModelMaxLength(config);
    return src;
  }
  if (HasHfByteBpeFiles(dir)) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir,
        ": has vocab.json + merges.txt: a byte-level BPE tokenizer (RoBERTa's, GPT-2's); "
        "training and predict take BERT-family models, whose tokenizer is WordPiece "
        "(vocab.txt, or tokenizer.json with a WordPiece model)"));
  }
  const std::string json_path = dir + "/tokenizer.json";
  if (fs::exists(json_path, ec)) {
    RM_ASSIGN_OR_RETURN(HfTokenizerSource src, ReadTokenizerJson(json_path, config));
    src.compat = compat;
    return src;
  }
  return absl::NotFoundError(
      absl::StrCat(dir, ": has neither vocab.txt nor tokenizer.json (the tokenizer's vocabulary)"));
}

bool HasHfByteBpeFiles(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(dir + "/vocab.txt", ec) && fs::exists(dir + "/vocab.json", ec) &&
         fs::exists(dir + "/merges.txt", ec);
}

absl::StatusOr<HfByteBpeTokenizer> ReadHfByteBpeTokenizer(
    const std::string& dir, std::optional<jobspec::TokenizerCompat> compat) {
  for (const char* name : {"tokenizer_config.json", "vocab.json", "merges.txt", "tokenizer.json"}) {
    RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(absl::StrCat(dir, "/", name)));
  }
  const nlohmann::json config = ReadTokenizerConfig(dir);
  RM_ASSIGN_OR_RETURN(const jobspec::TokenizerCompat recorded, ReadCompat(dir, config));
  ByteBpeOptions options{.compat = compat.value_or(recorded)};
  if (config.is_object()) {
    auto it = config.find("add_prefix_space");
    if (it != config.end() && it->is_boolean()) options.add_prefix_space = it->get<bool>();
  }
  std::error_code ec;
  const std::string vocab = dir + "/vocab.json", merges = dir + "/merges.txt";
  if (fs::exists(vocab, ec) || fs::exists(merges, ec)) {
    RM_ASSIGN_OR_RETURN(ByteBpeTokenizer t, ByteBpeTokenizer::FromFiles(vocab, merges, options));
    return HfByteBpeTokenizer{std::move(t), ModelMaxLength(config), vocab + " + " + merges};
  }
  const std::string json_path = dir + "/tokenizer.json";
  if (fs::exists(json_path, ec)) {
    RM_ASSIGN_OR_RETURN(ByteBpeTokenizer t,
                        ByteBpeTokenizer::FromTokenizerJson(json_path, options));
    return HfByteBpeTokenizer{std::move(t), ModelMaxLength(config), json_path};
  }
  return absl::NotFoundError(absl::StrCat(
      dir,
      ": has neither vocab.json + merges.txt nor tokenizer.json (a byte-level BPE tokenizer)"));
}

std::string TokenizerConfigJson(bool do_lower_case, int model_max_length,
                                jobspec::TokenizerCompat compat) {
  nlohmann::ordered_json j;
  j["clean_up_tokenization_spaces"] = true;
  j["cls_token"] = "[CLS]";
  j["do_basic_tokenize"] = true;
  j["do_lower_case"] = do_lower_case;
  j["mask_token"] = "[MASK]";
  j["model_max_length"] = model_max_length;
  j["never_split"] = nullptr;
  j["pad_token"] = "[PAD]";
  // Which of HF's tokenizers the model was trained to match (always written, so that a reader
  // need not know the default); predict reads it back.
  j[kTokenizerCompatKey] = std::string(jobspec::SettingName(compat));
  j["sep_token"] = "[SEP]";
  // null = follow do_lower_case, which is what BertTokenizer does by default.
  j["strip_accents"] = nullptr;
  j["tokenize_chinese_chars"] = true;
  j["tokenizer_class"] = "BertTokenizer";
  j["unk_token"] = "[UNK]";
  return j.dump(2) + "\n";
}

std::string SpecialTokensMapJson() {
  nlohmann::ordered_json j;
  j["cls_token"] = "[CLS]";
  j["mask_token"] = "[MASK]";
  j["pad_token"] = "[PAD]";
  j["sep_token"] = "[SEP]";
  j["unk_token"] = "[UNK]";
  return j.dump(2) + "\n";
}

std::string TokenizerJson(const std::vector<std::string>& vocab, bool do_lower_case) {
  using J = nlohmann::ordered_json;
  J ids = J::object();
  for (size_t i = 0; i < vocab.size(); ++i) ids[vocab[i]] = i;  // a repeated token: later id
  J added = J::array();
  for (const char* t : kSpecialTokens) {
    if (!ids.contains(t)) continue;
    added.push_back({{"id", ids[t]},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  auto special = [](const char* t, int type) {
    return J{{"SpecialToken", {{"id", t}, {"type_id", type}}}};
  };
  auto seq = [](const char* s, int type) {
    return J{{"Sequence", {{"id", s}, {"type_id", type}}}};
  };
  J j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = {{"type", "BertNormalizer"},
                     {"clean_text", true},
                     {"handle_chinese_chars", true},
                     {"strip_accents", nullptr},
                     {"lowercase", do_lower_case}};
  j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", J::array({special("[CLS]", 0), seq("A", 0), special("[SEP]", 0)})},
      {"pair", J::array({special("[CLS]", 0), seq("A", 0), special("[SEP]", 0), seq("B", 1),
                         special("[SEP]", 1)})},
      {"special_tokens",
       {{"[CLS]",
         {{"id", "[CLS]"}, {"ids", J::array({ids["[CLS]"]})}, {"tokens", J::array({"[CLS]"})}}},
        {"[SEP]",
         {{"id", "[SEP]"}, {"ids", J::array({ids["[SEP]"]})}, {"tokens", J::array({"[SEP]"})}}}}}};
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  j["model"] = {{"type", "WordPiece"},
                {"unk_token", "[UNK]"},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100},
                {"vocab", ids}};
  return j.dump(2) + "\n";
}

}  // namespace ringmaster::trainer
