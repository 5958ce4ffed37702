// Where each tensor of BertForSequenceClassification sits in MakeBertParamLayout's list of specs,
// and the dropout stream of each dropout site: shared by the CPU model and the CUDA model, so the
// two read the same parameters and draw the same masks for the same seed.
#pragma once

#include <cstdint>

#include "trainer/model/cpu_ops.h"

namespace ringmaster::trainer::bert_spec {

// Spec indices: the embeddings, then kLayerCount per encoder layer, then the head.
enum Emb { kWord = 0, kPos, kType, kEmbLnW, kEmbLnB, kEmbCount };
enum Layer {
  kQW = 0,
  kKW,
  kVW,
  kQB,
  kKB,
  kVB,
  kAoW,
  kAoB,
  kLn1W,
  kLn1B,
  kInW,
  kInB,
  kOutW,
  kOutB,
  kLn2W,
  kLn2B,
  kLayerCount
};
enum Head { kPoolW = 0, kPoolB, kClsW, kClsB };

constexpr int LayerIndex(int l, int k) { return kEmbCount + kLayerCount * l + k; }
constexpr int HeadIndex(int num_layers, int k) { return kEmbCount + kLayerCount * num_layers + k; }

// Dropout seeds per site: distinct streams for every layer (0 embeddings, 1..L layers, L+1 head)
// and place within it.
inline uint64_t SiteSeed(uint64_t seed, int layer, int site) {
  return cpu::Mix64(seed ^ cpu::Mix64(static_cast<uint64_t>(layer) * 16 + site + 1));
}

}  // namespace ringmaster::trainer::bert_spec
