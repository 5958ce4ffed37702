#include "trainer/io/hf_model_dir.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"
#include "trainer/io/hf_tokenizer_files.h"
#include "trainer/io/model_paths.h"
#include "trainer/io/safetensors.h"
#include "trainer/text/wordpiece.h"

namespace ringmaster::trainer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxJsonBytes = size_t{64} << 20;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Maps a checkpoint tensor name to the BertForSequenceClassification name of the layout: a
// BertModel checkpoint lacks the "bert." prefix, and old TF-converted checkpoints call the
// LayerNorm parameters gamma/beta (transformers renames them the same way when loading).
std::string CanonicalName(absl::string_view name) {
  std::string out(name);
  for (absl::string_view top : {"embeddings.", "encoder.", "pooler."}) {
    if (absl::StartsWith(name, top)) {
      out = absl::StrCat("bert.", name);
      break;
    }
  }
  if (absl::StrContains(out, "LayerNorm.")) {
    if (absl::EndsWith(out, ".gamma")) {
      out.replace(out.size() - 5, 5, "weight");
    } else if (absl::EndsWith(out, ".beta")) {
      out.replace(out.size() - 4, 4, "bias");
    }
  }
  return out;
}

std::string StripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// Writes all files of the export into `tmp` (which exists and is empty).
absl::Status WriteExportFiles(const std::string& parent, const std::string& tmp,
                              const BertConfig& config, const ParamLayout& layout,
                              const float* params, const HfTokenizerExport& tok) {
  RM_RETURN_IF_ERROR(
      WriteFileAtomicBeneath(parent, tmp + "/config.json", BertConfigToJson(config)));
  std::vector<TensorToWrite> tensors;
  tensors.reserve(layout.specs.size());
  for (const ParamSpec& s : layout.specs) {
    tensors.push_back({s.name, DType::kF32, s.shape, params + s.offset, s.numel * sizeof(float)});
  }
  // transformers refuses a safetensors checkpoint whose metadata lacks "format" (it tells the
  // loader which framework's layout the tensors are in).
  RM_RETURN_IF_ERROR(
      WriteSafetensors(tmp + "/model.safetensors", tensors, {{"format", "pt"}}, parent));
  RM_RETURN_IF_ERROR(WriteFileAtomicBeneath(parent, tmp + "/vocab.txt", tok.vocab_text));
  const int max_len =
      tok.model_max_length > 0 ? tok.model_max_length : config.max_position_embeddings;
  RM_RETURN_IF_ERROR(
      WriteFileAtomicBeneath(parent, tmp + "/tokenizer_config.json",
                             TokenizerConfigJson(tok.do_lower_case, max_len, tok.compat)));
  RM_RETURN_IF_ERROR(
      WriteFileAtomicBeneath(parent, tmp + "/special_tokens_map.json", SpecialTokensMapJson()));
  // tokenizer.json lists the tokens by id: read them as the trainer's tokenizer does.
  RM_ASSIGN_OR_RETURN(
      WordPieceTokenizer wp,
      WordPieceTokenizer::FromVocabText(tok.vocab_text, tok.do_lower_case, tmp + "/vocab.txt"));
  std::vector<std::string> tokens;
  tokens.reserve(static_cast<size_t>(wp.vocab_size()));
  for (int32_t i = 0; i < wp.vocab_size(); ++i) tokens.push_back(wp.token(i));
  return WriteFileAtomicBeneath(parent, tmp + "/tokenizer.json",
                                TokenizerJson(tokens, tok.do_lower_case));
}

// For a sentence-transformers model (DIR/modules.json): *model_dir becomes the folder of its
// Transformer module and *note names the modules that are not used. Nothing changes without
// modules.json. A module's "path" must name a folder inside `dir` (model_paths.h).
absl::Status ResolveSentenceTransformers(const std::string& dir, std::string* model_dir,
                                         std::string* note) {
  const std::string modules_path = dir + "/modules.json";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(modules_path, ec))) return absl::OkStatus();
  RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(modules_path));
  RM_ASSIGN_OR_RETURN(std::string text, ReadFile(modules_path, kMaxJsonBytes));
  RM_ASSIGN_OR_RETURN(const nlohmann::json j, ParseJsonLimited(text, modules_path));
  if (!j.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules_path, ": not a JSON list of modules (sentence-transformers)"));
  }
  std::string transformer;
  bool have_transformer = false;
  std::vector<std::string> replaced;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& m = j[i];
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(modules_path, ": module ", i, " has no \"type\": ", JsonExcerpt(m)));
    }
    const std::string type = m["type"].get<std::string>();
    if (m.contains("path") && !m["path"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          modules_path, ": module ", i, " \"path\" is not a string: ", JsonExcerpt(m["path"])));
    }
    const std::string path = m.value("path", std::string());
    const std::string named_by = absl::StrCat(modules_path, ": module ", i, " \"path\"");
    RM_RETURN_IF_ERROR(CheckModelEntry(path, named_by));
    if (!path.empty()) {
      RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(absl::StrCat(dir, "/", path), named_by));
    }
    if (absl::EndsWith(type, ".Transformer") && !have_transformer) {
      have_transformer = true;
      transformer = path;
      continue;
    }
    std::string what = type.substr(type.rfind('.') + 1);
    if (absl::EndsWith(type, ".Pooling")) {
      // Name the pooling mode the model was trained with: the head below reads [CLS] instead.
      const std::string pooling_config = absl::StrCat(dir, "/", path, "/config.json");
      RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(pooling_config, named_by));
      absl::StatusOr<std::string> pc = ReadFile(pooling_config, kMaxJsonBytes);
      const nlohmann::json p =
          pc.ok() ? ParseJsonLimited(*pc, pooling_config).value_or(nullptr) : nlohmann::json();
      if (p.is_object()) {
        for (const char* mode : {"mean_tokens", "cls_token", "max_tokens", "mean_sqrt_len_tokens",
                                 "weightedmean_tokens", "lasttoken"}) {
          if (p.value(absl::StrCat("pooling_mode_", mode), false)) {
            what = absl::StrCat(mode, " pooling");
            break;
          }
        }
      }
    }
    replaced.push_back(absl::StrCat(what, path.empty() ? "" : absl::StrCat(" (", path, ")")));
  }
  if (!have_transformer) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules_path, ": no module of type sentence_transformers.models.Transformer"));
  }
  *note = absl::StrCat(dir, " is a sentence-transformers model: its transformer (",
                       transformer.empty() ? "the folder itself" : transformer + "/",
                       ") is fine-tuned; ",
                       replaced.empty() ? "the classification head reads the pooled [CLS]"
                                        : absl::StrCat(absl::StrJoin(replaced, ", "),
                                                       " replaced by the classification head "
                                                       "(pooler + classifier over [CLS])"));
  // Last: `model_dir` may be `dir` itself.
  *model_dir = transformer.empty() ? dir : absl::StrCat(dir, "/", transformer);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfModel> LoadHfModelDir(const std::string& given_dir, int num_labels_override,
                                       uint64_t seed) {
  std::string dir = StripTrailingSlashes(given_dir);
  std::string note;
  RM_RETURN_IF_ERROR(ResolveSentenceTransformers(dir, &dir, &note));
  const std::string config_path = dir + "/config.json";
  std::error_code exists_ec;
  if (!fs::exists(config_path, exists_ec)) {
    return absl::NotFoundError(
        absl::StrCat(config_path,
                     ": no such file (a Hugging Face model directory needs config.json and "
                     "model.safetensors; a sentence-transformers one, modules.json)"));
  }
  RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(config_path));
  RM_ASSIGN_OR_RETURN(std::string config_text, ReadFile(config_path, kMaxJsonBytes));
  RM_ASSIGN_OR_RETURN(BertConfig config, ParseBertConfigJson(config_text, config_path));
  if (num_labels_override > 0 && num_labels_override != config.num_labels) {
    config.num_labels = num_labels_override;
    config.id2label.clear();  // names of the checkpoint's labels do not describe the new ones
  }
  RM_RETURN_IF_ERROR(ValidateBertConfig(config, config_path));

  const std::string st_path = dir + "/model.safetensors";
  std::error_code ec;
  if (!fs::exists(st_path, ec)) {
    for (const char* other : {"pytorch_model.bin", "model.safetensors.index.json"}) {
      if (fs::exists(fs::path(dir) / other, ec)) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir, ": has ", other,
            " but no model.safetensors; only a single model.safetensors "
            "is supported (convert with save_pretrained(dir, safe_serialization=True))"));
      }
    }
    return absl::NotFoundError(absl::StrCat(st_path, ": no such file"));
  }
  RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(st_path));
  RM_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsReader> reader, SafetensorsReader::Open(st_path));

  HfModel m;
  m.dir = dir;
  m.note = note;
  m.config = config;
  m.layout = MakeBertParamLayout(config);
  const ParamLayout& layout = m.layout;
  m.params.assign(layout.total, 0.0f);

  std::unordered_map<std::string, size_t> spec_index;
  for (size_t i = 0; i < layout.specs.size(); ++i) spec_index[layout.specs[i].name] = i;
  std::vector<const TensorInfo*> source(layout.specs.size(), nullptr);
  for (const TensorInfo& t : reader->tensors()) {
    auto it = spec_index.find(CanonicalName(t.name));
    if (it == spec_index.end()) continue;  // position_ids, cls.* heads, ...
    if (source[it->second] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(st_path, ": tensors '", source[it->second]->name, "' and '", t.name,
                       "' both map to parameter '", layout.specs[it->second].name, "'"));
    }
    source[it->second] = &t;
  }
  auto find = [&](const std::string& name) { return source[spec_index.at(name)]; };

  // A head is either wholly present or wholly absent; half of one means a broken checkpoint.
  auto head_present = [&](const std::string& prefix) -> absl::StatusOr<bool> {
    const TensorInfo* w = find(prefix + ".weight");
    const TensorInfo* b = find(prefix + ".bias");
    if ((w == nullptr) != (b == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(st_path, ": has '", prefix,
                                                     w ? ".weight" : ".bias", "' but not '", prefix,
                                                     w ? ".bias" : ".weight", "'"));
    }
    return w != nullptr;
  };
  RM_ASSIGN_OR_RETURN(const bool has_pooler, head_present("bert.pooler.dense"));
  RM_ASSIGN_OR_RETURN(bool has_classifier, head_present("classifier"));
  if (has_classifier) {
    // A head trained for another number of labels is replaced, as transformers does with
    // ignore_mismatched_sizes; any other shape difference is an error below.
    const TensorInfo* w = find("classifier.weight");
    const TensorInfo* b = find("classifier.bias");
    if (w->shape.size() == 2 && b->shape.size() == 1 && w->shape[0] == b->shape[0] &&
        w->shape[1] == config.hidden_size && w->shape[0] != config.num_labels) {
      has_classifier = false;
    }
  }
  if (!has_pooler) {
    InitBertParams(config, layout, seed, m.params.data(), "bert.pooler.");
    m.pooler_initialized_fresh = true;
  }
  if (!has_classifier) {
    InitBertParams(config, layout, seed, m.params.data(), "classifier.");
    m.classifier_initialized_fresh = true;
  }

  for (size_t i = 0; i < layout.specs.size(); ++i) {
    const ParamSpec& spec = layout.specs[i];
    if ((!has_pooler && absl::StartsWith(spec.name, "bert.pooler.")) ||
        (!has_classifier && absl::StartsWith(spec.name, "classifier."))) {
      continue;
    }
    const TensorInfo* t = source[i];
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(st_path, ": missing tensor '", spec.name, "'"));
    }
    if (t->shape != spec.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(st_path, ": tensor '", t->name, "' has shape ", ShapeString(t->shape),
                       ", expected ", ShapeString(spec.shape), " from ", config_path));
    }
    RM_RETURN_IF_ERROR(reader->ReadFloat(*t, m.params.data() + spec.offset, spec.numel));
  }
  return m;
}

absl::Status ExportHfModelDir(const std::string& dir, const BertConfig& config,
                              const ParamLayout& layout, const float* params,
                              const std::string& vocab_path, bool do_lower_case,
                              const std::map<std::string, std::string>& extra_files) {
  HfTokenizerExport tok;
  RM_ASSIGN_OR_RETURN(tok.vocab_text, ReadFile(vocab_path));
  tok.do_lower_case = do_lower_case;
  return ExportHfModelDir(dir, config, layout, params, tok, extra_files);
}

absl::Status ExportHfModelDir(const std::string& dir_in, const BertConfig& config,
                              const ParamLayout& layout, const float* params,
                              const HfTokenizerExport& tokenizer,
                              const std::map<std::string, std::string>& extra_files) {
  const std::string dir = StripTrailingSlashes(dir_in);
  RM_RETURN_IF_ERROR(ValidateBertConfig(config, absl::StrCat(dir, "/config.json")));
  // The names and shapes written must be the ones config.json implies, or the export would not
  // load back.
  const ParamLayout expected = MakeBertParamLayout(config);
  if (expected.specs.size() != layout.specs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": parameter layout has ", layout.specs.size(),
                     " tensors but the config implies ", expected.specs.size()));
  }
  for (size_t i = 0; i < expected.specs.size(); ++i) {
    const ParamSpec& a = expected.specs[i];
    const ParamSpec& b = layout.specs[i];
    if (a.name != b.name || a.shape != b.shape || a.offset != b.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": parameter layout entry ", i, " is '", b.name, "' ", ShapeString(b.shape),
          " but the config implies '", a.name, "' ", ShapeString(a.shape)));
    }
  }

  const fs::path target(dir);
  std::string parent = target.parent_path().string();
  if (parent.empty()) parent = ".";
  // A pinned parent (the trainer's output.dir, issue #31) exists and is reached through its
  // handle only: every step below goes through the *Beneath calls.
  if (!IsPinnedRoot(parent)) RM_RETURN_IF_ERROR(MakeDirs(parent));
  const std::string tmp = absl::StrCat(dir, ".tmp-", ::getpid());
  const std::string old = absl::StrCat(dir, ".old-", ::getpid());
  // Left by an earlier crash of a process with our pid.
  RM_RETURN_IF_ERROR(RemoveAllBeneath(parent, tmp));
  // Below the parent nothing is written through a link (issue #20): the export's files are
  // created in a directory made and reached without following links.
  RM_RETURN_IF_ERROR(MakeDirsBeneath(parent, tmp));

  absl::Status s = WriteExportFiles(parent, tmp, config, layout, params, tokenizer);
  for (const auto& [name, contents] : extra_files) {
    if (s.ok()) s = WriteFileAtomicBeneath(parent, absl::StrCat(tmp, "/", name), contents);
  }
  if (!s.ok()) {
    RemoveAllBeneath(parent, tmp).IgnoreError();
    return s;
  }

  std::error_code ec;
  bool moved_old = false;
  if (fs::exists(target, ec) || fs::is_symlink(target, ec)) {
    RM_RETURN_IF_ERROR(RemoveAllBeneath(parent, old));
    if (s = RenameBeneath(parent, dir, old); !s.ok()) {
      RemoveAllBeneath(parent, tmp).IgnoreError();
      return s;
    }
    moved_old = true;
  }
  if (s = RenameBeneath(parent, tmp, dir); !s.ok()) {
    // Best effort: put the old one back.
    if (moved_old) RenameBeneath(parent, old, dir).IgnoreError();
    RemoveAllBeneath(parent, tmp).IgnoreError();
    return s;
  }
  RM_RETURN_IF_ERROR(FsyncDirBeneath(parent, parent));
  if (moved_old) RM_RETURN_IF_ERROR(RemoveAllBeneath(parent, old));
  return absl::OkStatus();
}

bool ReadDoLowerCase(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  if (!CheckModelPathBeneathRoot(path).ok()) return true;
  absl::StatusOr<std::string> text = ReadFile(path, kMaxJsonBytes);
  if (!text.ok()) return true;
  const nlohmann::json j = ParseJsonLimited(*text, path).value_or(nullptr);
  if (!j.is_object()) return true;
  auto it = j.find("do_lower_case");
  if (it == j.end() || !it->is_boolean()) return true;
  return it->get<bool>();
}

}  // namespace ringmaster::trainer
