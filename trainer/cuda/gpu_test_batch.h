// A random training micro-batch for the CUDA model/engine tests: `B` rows of `S` token ids below
// the config's vocabulary, each row's last 0..3 positions padding (mask 0, id 0), labels 0/1.
// Deterministic in `seed`.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "jobspec/bert_config.h"
#include "trainer/model/bert_model.h"

namespace ringmaster::trainer::cuda {

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
