// Hugging Face model directories: config.json + model.safetensors (+ tokenizer files), loaded
// into and exported from the flat parameter buffer of MakeBertParamLayout.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "jobspec/bert_config.h"
#include "jobspec/job_settings.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {

struct HfModel {
  BertConfig config;
  ParamLayout layout;
  std::vector<float> params;  // layout.total floats
  // True when the checkpoint had no usable classifier (absent, or for another num_labels) and
  // "classifier.*" was initialized from the seed, as transformers does.
  bool classifier_initialized_fresh = false;
  // True when the checkpoint had no pooler (a headless BertModel may be saved without one).
  bool pooler_initialized_fresh = false;
  // The directory the model was read from: the one given, or for a sentence-transformers model
  // the folder of its transformer module (its tokenizer files lie there too).
  std::string dir;
  // Set for a sentence-transformers model: what was taken from it and what is replaced, for
  // the log.
  std::string note;
};

// Reads DIR/config.json and DIR/model.safetensors (pytorch_model.bin is refused: only
// safetensors is supported). `num_labels_override` > 0 replaces config.num_labels (label names
// are dropped if their count differs). Tensor names may carry the "bert." prefix or not (a
// BertModel checkpoint), and LayerNorm "gamma"/"beta" are accepted for "weight"/"bias".
// Tensors outside the layout (position_ids, "cls.*" pretraining heads, ...) are ignored. Every
// layout tensor except the pooler and classifier must be present with the exact shape; a
// missing pooler, or a missing or differently sized classifier, is initialized fresh with
// InitBertParams(config, layout, seed, ...). F16/BF16/F64 tensors are converted to fp32.
// A sentence-transformers folder (DIR/modules.json) is read through its Transformer module's
// folder ("0_Transformer/", or DIR itself); its pooling and later modules are not used: the
// classification head reads the pooler output of [CLS] instead (HfModel::note says so).
absl::StatusOr<HfModel> LoadHfModelDir(const std::string& dir, int num_labels_override,
                                       uint64_t seed);

// The tokenizer an export writes: vocab.txt's contents, its casing, and the sequence length the
// model was trained with (tokenizer_config.json's model_max_length, where transformers
// truncates; 0: config.max_position_embeddings).
struct HfTokenizerExport {
  std::string vocab_text;
  bool do_lower_case = true;
  int model_max_length = 0;
  jobspec::TokenizerCompat compat = jobspec::TokenizerCompat::kSlow;  // model.tokenizer_compat
};

// Writes DIR/config.json, DIR/model.safetensors (F32, HF names and shapes, layout order),
// DIR/vocab.txt, DIR/tokenizer_config.json, DIR/special_tokens_map.json and DIR/tokenizer.json
// (hf_tokenizer_files.h), so that transformers' from_pretrained(DIR), AutoTokenizer and
// pipeline load the model and tokenizer. Crash safe: everything is built and fsynced in
// "DIR.tmp-<pid>", an old DIR is renamed to "DIR.old-<pid>", the new one renamed into place, the
// parent fsynced, and only then is the old one deleted. A crash leaves DIR either old or new (or,
// in the instant between the two renames, absent with the old copy beside it). `extra_files` (name
// -> contents) are written beside them, in the same crash-safe step.
absl::Status ExportHfModelDir(const std::string& dir, const BertConfig& config,
                              const ParamLayout& layout, const float* params,
                              const HfTokenizerExport& tokenizer,
                              const std::map<std::string, std::string>& extra_files = {});
// The same with vocab.txt copied from `vocab_path` and model_max_length 0.
absl::Status ExportHfModelDir(const std::string& dir, const BertConfig& config,
                              const ParamLayout& layout, const float* params,
                              const std::string& vocab_path, bool do_lower_case,
                              const std::map<std::string, std::string>& extra_files = {});

// tokenizer_config.json's "do_lower_case" when present and boolean; true otherwise (the
// BertTokenizer default).
bool ReadDoLowerCase(const std::string& dir);

}  // namespace ringmaster::trainer
