#include "jobspec/model_memory.h"

#include <algorithm>

namespace ringmaster::trainer {

uint64_t BertParameterCount(const BertConfig& c) {
  const uint64_t v = static_cast<uint64_t>(std::max(c.vocab_size, 0));
  const uint64_t h = static_cast<uint64_t>(std::max(c.hidden_size, 0));
  const uint64_t i = static_cast<uint64_t>(std::max(c.intermediate_size, 0));
  const uint64_t p = static_cast<uint64_t>(std::max(c.max_position_embeddings, 0));
  const uint64_t t = static_cast<uint64_t>(std::max(c.type_vocab_size, 0));
  const uint64_t l = static_cast<uint64_t>(std::max(c.num_hidden_layers, 0));
  const uint64_t labels = static_cast<uint64_t>(std::max(c.num_labels, 0));
  const uint64_t embeddings = (v + p + t) * h + 2 * h;  // word, position, type; LayerNorm
  // Q, K, V and the output projection (weights and biases), two LayerNorms, the FFN's two.
  const uint64_t layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h);
  const uint64_t pooler = h * h + h;
  const uint64_t classifier = h * labels + labels;
  return embeddings + l * layer + pooler + classifier;
}

uint64_t ModelStateBytesPerRank(uint64_t params, jobspec::Sharding sharding, int world_size,
                                int procs_per_node) {
  constexpr uint64_t kBytes = 4;  // fp32
  const uint64_t world = static_cast<uint64_t>(std::max(world_size, 1));
  const uint64_t local = static_cast<uint64_t>(std::max(procs_per_node, 1));
  auto shard = [](uint64_t n, uint64_t ranks) { return (n + ranks - 1) / ranks; };
  switch (sharding) {
    case jobspec::Sharding::kNoShard:
      return 4 * kBytes * params;
    case jobspec::Sharding::kShardGradOp:
      return kBytes * params + 3 * kBytes * shard(params, world);
    case jobspec::Sharding::kFullShard:
      return 4 * kBytes * shard(params, world);
    case jobspec::Sharding::kHybridShard:
      return 4 * kBytes * shard(params, std::min(local, world));
  }
  return 4 * kBytes * params;
}

}  // namespace ringmaster::trainer
