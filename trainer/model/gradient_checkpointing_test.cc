// ctest-labels: unit
// Gradient checkpointing in the CPU model (BertModel's `gradient_checkpointing`): backward
// recomputes each encoder layer from its saved input with the same dropout masks, so the loss,
// logits and every gradient are the same bits as without it, over accumulated micro-batches of
// different shapes and seeds; and the units are reached in the same order (the data-parallel
// engines gather and reduce by it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {
namespace {

BertConfig Config(int num_labels, float dropout) {
  BertConfig c;
  c.vocab_size = 31;
  c.hidden_size = 16;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 16;
  c.type_vocab_size = 2;
  c.num_labels = num_labels;
  c.hidden_dropout_prob = dropout;
  c.attention_probs_dropout_prob = dropout;
  return c;
}

struct MicroBatch {
  int B = 0, S = 0;
  std::vector<int32_t> ids, types;
  std::vector<float> mask, labels;
  BertInputs Inputs() const { return {B, S, ids.data(), types.data(), mask.data(), labels.data()}; }
};

// Rows of random ids with 0..2 padding positions at the end, two segments, labels per head.
MicroBatch Make(const BertConfig& c, int B, int S, uint32_t seed) {
  MicroBatch m;
  m.B = B;
  m.S = S;
  std::mt19937 rng(seed);
  for (int b = 0; b < B; ++b) {
    const int len = S - static_cast<int>(rng() % 3);
    for (int s = 0; s < S; ++s) {
      m.ids.push_back(s < len ? 1 + static_cast<int32_t>(rng() % (c.vocab_size - 1)) : 0);
      m.types.push_back(s < len && s >= len / 2 ? 1 : 0);
      m.mask.push_back(s < len ? 1.0f : 0.0f);
    }
    m.labels.push_back(c.num_labels == 1 ? 0.5f * b - 0.3f : static_cast<float>(b % c.num_labels));
  }
  return m;
}

// Records the unit accesses, in order, of a flat buffer access.
class RecordingAccess : public UnitAccess<float> {
 public:
  RecordingAccess(const std::vector<size_t>& unit_begin, const float* params, float* grads)
      : flat_(unit_begin, params, grads) {}
  const float* AcquireParams(int u) override {
    Note('P', u);
    return flat_.AcquireParams(u);
  }
  void ReleaseParams(int u) override {
    Note('p', u);
    flat_.ReleaseParams(u);
  }
  float* AcquireGrads(int u) override {
    Note('G', u);
    return flat_.AcquireGrads(u);
  }
  void GradsDone(int u) override {
    Note('g', u);
    flat_.GradsDone(u);
  }
  std::vector<std::string> log;

 private:
  void Note(char kind, int unit) {
    std::string entry(1, kind);
    entry += std::to_string(unit);
    log.push_back(entry);
  }
  FlatUnitAccess<float> flat_;
};

struct Outcome {
  std::vector<float> losses, logits, grads;
  std::vector<std::string> accesses;
};

// Two accumulated training micro-batches of different shapes and seeds, then an evaluation.
Outcome TrainTwoMicroBatches(const BertConfig& c, bool checkpointing) {
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> params(layout.total);
  InitBertParams(c, layout, 5, params.data());
  std::mt19937 rng(9);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (float& p : params) p += noise(rng);  // non-trivial biases and LayerNorm terms
  std::vector<size_t> unit_begin;
  for (const ParamSpec& s : layout.specs) {
    if (s.unit >= static_cast<int>(unit_begin.size())) unit_begin.resize(s.unit + 1, s.offset);
  }
  BertModel<float> model(c, layout, checkpointing);
  EXPECT_EQ(model.gradient_checkpointing(), checkpointing);
  Outcome r;
  r.grads.assign(layout.total, 0.0f);
  RecordingAccess access(unit_begin, params.data(), r.grads.data());
  const MicroBatch first = Make(c, 3, 9, 1), second = Make(c, 2, 6, 2);
  r.losses.push_back(model.Forward(&access, first.Inputs(), true, 1234));
  model.Backward(&access, 0.6f);
  r.losses.push_back(model.Forward(&access, second.Inputs(), true, 1235));
  r.logits = model.logits();
  model.Backward(&access, 0.4f);
  r.losses.push_back(model.Forward(&access, first.Inputs(), false, 0));
  r.logits.insert(r.logits.end(), model.logits().begin(), model.logits().end());
  r.accesses = access.log;
  return r;
}

// Same bits: any difference, however small, names the first tensor and index where it is.
void ExpectSameBits(const BertConfig& c, const Outcome& plain, const Outcome& ckpt) {
  ASSERT_EQ(plain.losses.size(), ckpt.losses.size());
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&plain.losses[i], &ckpt.losses[i], sizeof(float)), 0)
        << "loss " << i << ": " << plain.losses[i] << " vs " << ckpt.losses[i];
  }
  ASSERT_EQ(plain.logits.size(), ckpt.logits.size());
  EXPECT_EQ(std::memcmp(plain.logits.data(), ckpt.logits.data(), plain.logits.size() * 4), 0);
  const ParamLayout layout = MakeBertParamLayout(c);
  int differing = 0;
  for (const ParamSpec& s : layout.specs) {
    for (size_t i = 0; i < s.numel; ++i) {
      const float a = plain.grads[s.offset + i], b = ckpt.grads[s.offset + i];
      if (std::memcmp(&a, &b, sizeof(float)) != 0) {
        ADD_FAILURE() << s.name << "[" << i << "]: " << a << " without, " << b << " with";
        ++differing;
        break;
      }
    }
  }
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(plain.accesses, ckpt.accesses);
}

TEST(GradientCheckpointing, SameBitsWithDropout) {
  const BertConfig c = Config(3, 0.1f);
  const Outcome plain = TrainTwoMicroBatches(c, false);
  const Outcome ckpt = TrainTwoMicroBatches(c, true);
  ExpectSameBits(c, plain, ckpt);
  // The comparison sees something: gradients are non-zero in every layer's query weight.
  const ParamLayout layout = MakeBertParamLayout(c);
  for (const ParamSpec& s : layout.specs) {
    if (s.name.find("query.weight") == std::string::npos) continue;
    double sum = 0;
    for (size_t i = 0; i < s.numel; ++i) sum += std::abs(plain.grads[s.offset + i]);
    EXPECT_GT(sum, 0.0) << s.name;
  }
}

TEST(GradientCheckpointing, SameBitsRegressionWithoutDropout) {
  const BertConfig c = Config(1, 0.0f);
  ExpectSameBits(c, TrainTwoMicroBatches(c, false), TrainTwoMicroBatches(c, true));
}

}  // namespace
}  // namespace ringmaster::trainer
