// ctest-labels: unit
#include "jobspec/key_suggestion.h"

#include <gtest/gtest.h>

#include "jobspec/job_spec.h"

namespace ringmaster::jobspec {
namespace {

// Against the parser's real key list, so that a renamed key breaks these.
const std::vector<std::string>& Known() {
  static const std::vector<std::string> known = trainer::JobSpecKnownKeys();
  return known;
}

TEST(SuggestJobKeyTest, ForeignNamesMapToOurs) {
  EXPECT_EQ(SuggestJobKey("train.learning_rate", Known()), "train.lr");
  EXPECT_EQ(SuggestJobKey("learning_rate", Known()), "train.lr");
  EXPECT_EQ(SuggestJobKey("train.num_train_epochs", Known()), "train.epochs");
  EXPECT_EQ(SuggestJobKey("train.per_device_train_batch_size", Known()), "train.micro_batch_size");
  EXPECT_EQ(SuggestJobKey("data.max_seq_length", Known()), "data.max_seq_len");
  EXPECT_EQ(SuggestJobKey("distributed.nproc_per_node", Known()), "distributed.procs_per_node");
  EXPECT_EQ(SuggestJobKey("train.evaluation_strategy", Known()), "train.eval_strategy");
  EXPECT_EQ(SuggestJobKey("train.lr_scheduler_type", Known()), "train.lr_schedule");
}

TEST(SuggestJobKeyTest, MisplacedKeysAndTypos) {
  EXPECT_EQ(SuggestJobKey("train.max_seq_len", Known()), "data.max_seq_len");
  EXPECT_EQ(SuggestJobKey("train.lrr", Known()), "train.lr");
  EXPECT_EQ(SuggestJobKey("train.warmup_step", Known()), "train.warmup_steps");
  EXPECT_EQ(SuggestJobKey("trian", Known()), "train");
  EXPECT_EQ(SuggestJobKey("distributed.node", Known()), "distributed.nodes");
  EXPECT_EQ(SuggestJobKey("model.config.hiden_size", Known()), "model.config.hidden_size");
}

TEST(SuggestJobKeyTest, NothingCloseMeansNoSuggestion) {
  EXPECT_EQ(SuggestJobKey("bogus", Known()), std::nullopt);
  EXPECT_EQ(SuggestJobKey("train.completely_unrelated", Known()), std::nullopt);
}

}  // namespace
}  // namespace ringmaster::jobspec
