#include "trainer/model/bert_params.h"

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::trainer {

const ParamSpec* ParamLayout::Find(const std::string& name) const {
  for (const ParamSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

namespace {

class LayoutBuilder {
 public:
  explicit LayoutBuilder(ParamLayout* out) : out_(out) {}
  void Add(std::string name, std::vector<int64_t> shape, bool decay, ParamInit init, int unit) {
    ParamSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.numel = 1;
    for (int64_t d : s.shape) s.numel *= static_cast<size_t>(d);
    s.offset = out_->total;
    s.weight_decay = decay;
    s.init = init;
    s.unit = unit;
    out_->total += s.numel;
    out_->specs.push_back(std::move(s));
  }
  void Linear(const std::string& prefix, int64_t out, int64_t in, int unit) {
    Add(prefix + ".weight", {out, in}, true, ParamInit::kNormal, unit);
    Add(prefix + ".bias", {out}, false, ParamInit::kZeros, unit);
  }
  void LayerNorm(const std::string& prefix, int64_t n, int unit) {
    Add(prefix + ".weight", {n}, false, ParamInit::kOnes, unit);
    Add(prefix + ".bias", {n}, false, ParamInit::kZeros, unit);
  }

 private:
  ParamLayout* out_;
};

}  // namespace

ParamLayout MakeBertParamLayout(const BertConfig& c) {
  ParamLayout layout;
  LayoutBuilder b(&layout);
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  b.Add("bert.embeddings.word_embeddings.weight", {c.vocab_size, H}, true, ParamInit::kNormal, 0);
  b.Add("bert.embeddings.position_embeddings.weight", {c.max_position_embeddings, H}, true,
        ParamInit::kNormal, 0);
  b.Add("bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, H}, true,
        ParamInit::kNormal, 0);
  b.LayerNorm("bert.embeddings.LayerNorm", H, 0);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat("bert.encoder.layer.", l, ".");
    const int unit = l + 1;
    // Q, K and V weights adjacent, then their biases: the flat buffer then holds one [3H, H]
    // matrix and one [3H] bias, so the projection is a single GEMM.
    for (const char* m : {"query", "key", "value"}) {
      b.Add(p + "attention.self." + m + ".weight", {H, H}, true, ParamInit::kNormal, unit);
    }
    for (const char* m : {"query", "key", "value"}) {
      b.Add(p + "attention.self." + m + ".bias", {H}, false, ParamInit::kZeros, unit);
    }
    b.Linear(p + "attention.output.dense", H, H, unit);
    b.LayerNorm(p + "attention.output.LayerNorm", H, unit);
    b.Linear(p + "intermediate.dense", I, H, unit);
    b.Linear(p + "output.dense", H, I, unit);
    b.LayerNorm(p + "output.LayerNorm", H, unit);
  }
  const int head_unit = c.num_hidden_layers + 1;
  b.Linear("bert.pooler.dense", H, H, head_unit);
  b.Linear("classifier", c.num_labels, H, head_unit);
  return layout;
}

void InitBertParams(const BertConfig& c, const ParamLayout& layout, uint64_t seed, float* params,
                    const std::string& prefix) {
  for (const ParamSpec& s : layout.specs) {
    if (!prefix.empty() && !absl::StartsWith(s.name, prefix)) continue;
    float* p = params + s.offset;
    switch (s.init) {
      case ParamInit::kZeros:
        std::fill(p, p + s.numel, 0.0f);
        break;
      case ParamInit::kOnes:
        std::fill(p, p + s.numel, 1.0f);
        break;
      case ParamInit::kNormal: {
        // One stream per tensor, seeded from (seed, name), so a tensor's init does not depend
        // on which other tensors exist.
        std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                          static_cast<uint32_t>(std::hash<std::string>{}(s.name))};
        std::mt19937_64 rng(seq);
        std::normal_distribution<float> dist(0.0f, c.initializer_range);
        for (size_t i = 0; i < s.numel; ++i) p[i] = dist(rng);
        break;
      }
    }
    if (s.name == "bert.embeddings.word_embeddings.weight" && c.pad_token_id >= 0 &&
        c.pad_token_id < c.vocab_size) {
      std::fill(p + static_cast<size_t>(c.pad_token_id) * c.hidden_size,
                p + static_cast<size_t>(c.pad_token_id + 1) * c.hidden_size, 0.0f);
    }
  }
}

std::string LayoutFingerprint(const ParamLayout& layout) {
  std::string out = absl::StrCat(layout.specs.size(), " tensors, ", layout.total, " floats");
  // FNV-1a over every tensor's name and shape.
  uint64_t h = 1469598103934665603ULL;
  for (const ParamSpec& s : layout.specs) {
    for (char c : s.name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
    for (int64_t d : s.shape) h = (h ^ static_cast<uint64_t>(d)) * 1099511628211ULL;
  }
  return absl::StrCat(out, ", ", absl::StrFormat("%016x", h));
}

}  // namespace ringmaster::trainer
