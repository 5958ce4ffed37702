// Test inputs for the CUDA model/engine tests. A random training micro-batch: `B` rows of `S` token
// ids below the config's vocabulary, each row's last 0..3 positions padding (mask 0, id 0), labels
// 0/1. Deterministic in `seed`.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "jobspec/bert_config.h"
#include "trainer/model/bert_model.h"

namespace ringmaster::trainer::cuda {

// The small BERT of the CUDA trainer-state and mixed-precision tests: 2 layers, H=32, 2 heads,
// I=40, vocabulary 53, 2 labels; dropout 0.1 (the HF default).
inline BertConfig SmallTestConfig() {
  BertConfig c;
  c.vocab_size = 53;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 40;
  c.max_position_embeddings = 16;
  c.num_labels = 2;
  return c;
}

struct TestMicroBatch {
  int B = 0, S = 0;
  std::vector<int32_t> ids;
  std::vector<float> mask, labels;
  BertInputs Inputs() const {
    BertInputs in;
    in.batch = B;
    in.seq = S;
    in.input_ids = ids.data();
    in.attention_mask = mask.data();
    in.labels = labels.data();
    return in;
  }
};

inline TestMicroBatch MakeTestMicroBatch(const BertConfig& c, uint32_t seed, int B, int S = 8) {
  TestMicroBatch m;
  m.B = B;
  m.S = S;
  std::mt19937 rng(seed);
  for (int b = 0; b < B; ++b) {
    const int len = S - static_cast<int>(rng() % 4);
    for (int s = 0; s < S; ++s) {
      m.ids.push_back(s < len ? 1 + static_cast<int32_t>(rng() % (c.vocab_size - 1)) : 0);
      m.mask.push_back(s < len ? 1.0f : 0.0f);
    }
    m.labels.push_back(static_cast<float>(rng() % 2));
  }
  return m;
}

}  // namespace ringmaster::trainer::cuda
