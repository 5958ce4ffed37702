// The parameter list of BertForSequenceClassification with Hugging Face names, laid out in
// one flat fp32 buffer. Order: embeddings, then each layer (a contiguous unit, so that a later
// sharding can cut per-layer flat parameters), then pooler and classifier.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "jobspec/bert_config.h"

namespace ringmaster::trainer {

enum class ParamInit { kNormal, kZeros, kOnes };

struct ParamSpec {
  std::string name;  // HF tensor name, e.g. "bert.encoder.layer.0.attention.self.query.weight"
  std::vector<int64_t> shape;  // HF shape; Linear weights are [out, in]
  size_t offset = 0;           // into the flat buffer, in floats
  size_t numel = 0;
  bool weight_decay = true;  // false for biases and LayerNorm parameters
  ParamInit init = ParamInit::kNormal;
  int unit = 0;  // 0 = embeddings, 1..L = layers, L+1 = pooler + classifier
};

struct ParamLayout {
  std::vector<ParamSpec> specs;
  size_t total = 0;  // floats

  const ParamSpec* Find(const std::string& name) const;
};

ParamLayout MakeBertParamLayout(const BertConfig& c);

// HF-style init: normal(0, initializer_range) for weights and embeddings, zero biases, LayerNorm
// weight 1 / bias 0, the padding row of the word embeddings zeroed. Only specs whose name
// starts with `prefix` are touched (empty = all).
void InitBertParams(const BertConfig& c, const ParamLayout& layout, uint64_t seed, float* params,
                    const std::string& prefix = "");

// A short description of the layout's names and shapes (stored in checkpoints, to refuse one
// written for another model).
std::string LayoutFingerprint(const ParamLayout& layout);

}  // namespace ringmaster::trainer
