// ctest-labels: unit
#include "jobspec/model_memory.h"

#include <gtest/gtest.h>

namespace ringmaster::trainer {
namespace {

TEST(ModelMemoryTest, BertBaseParameterCount) {
  // bert-base-uncased with a 2-label head: 109,482,240 in the encoder, embeddings and pooler
  // (the figure transformers reports for BertModel) plus 768 x 2 + 2 in the classifier.
  BertConfig c;
  c.num_labels = 2;
  EXPECT_EQ(BertParameterCount(c), uint64_t{109'482'240} + 768 * 2 + 2);
}

TEST(ModelMemoryTest, StatePerRankFollowsTheSharding) {
  const uint64_t p = 1'000'000;
  EXPECT_EQ(ModelStateBytesPerRank(p, jobspec::Sharding::kNoShard, 4, 4), 16 * p);
  EXPECT_EQ(ModelStateBytesPerRank(p, jobspec::Sharding::kShardGradOp, 4, 4), 4 * p + 3 * p);
  EXPECT_EQ(ModelStateBytesPerRank(p, jobspec::Sharding::kFullShard, 4, 4), 4 * p);
  // hybrid_shard shards within a node only: 8 ranks, 2 per node.
  EXPECT_EQ(ModelStateBytesPerRank(p, jobspec::Sharding::kHybridShard, 8, 2), 8 * p);
  // A shard is rounded up, never down.
  EXPECT_EQ(ModelStateBytesPerRank(3, jobspec::Sharding::kFullShard, 2, 2), 16 * 2);
}

}  // namespace
}  // namespace ringmaster::trainer
