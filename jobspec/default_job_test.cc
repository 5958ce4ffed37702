#include "jobspec/default_job.h"

#include "gtest/gtest.h"
#include "jobspec/job_spec.h"

namespace ringmaster::trainer {
namespace {

TEST(DefaultJobTest, ParsesAndResolvesAgainstRunRoot) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(DefaultDemoJobYaml(), "<default job>", "/r");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "demo");
  const ModelSpec& m = spec->model;
  EXPECT_TRUE(m.has_config);
  EXPECT_TRUE(m.init_from.empty());
  EXPECT_EQ(m.vocab, "/r/runs/demo/data/vocab.txt");
  EXPECT_EQ(m.config.vocab_size, 0);  // taken from vocab.txt by the trainer
  EXPECT_EQ(m.config.hidden_size, 128);
  EXPECT_EQ(m.config.num_hidden_layers, 2);
  EXPECT_EQ(m.config.num_attention_heads, 4);
  EXPECT_EQ(m.config.intermediate_size, 512);
  EXPECT_EQ(m.config.max_position_embeddings, 64);
  EXPECT_FLOAT_EQ(m.config.hidden_dropout_prob, 0.1f);
  EXPECT_FLOAT_EQ(m.config.attention_probs_dropout_prob, 0.1f);
  EXPECT_EQ(spec->data.train, "/r/runs/demo/data/train.tsv");
  EXPECT_EQ(spec->data.eval, "/r/runs/demo/data/dev.tsv");
  EXPECT_EQ(spec->data.max_seq_len, 64);
  EXPECT_TRUE(spec->data.shuffle);
  EXPECT_EQ(spec->train.epochs, 8);
  EXPECT_EQ(spec->train.global_batch_size, 32);
  EXPECT_EQ(spec->train.micro_batch_size, 32);
  EXPECT_DOUBLE_EQ(spec->train.lr, 5e-4);
  EXPECT_EQ(SettingName(spec->train.lr_schedule), "linear");
  EXPECT_DOUBLE_EQ(spec->train.warmup_ratio, 0.06);
  EXPECT_DOUBLE_EQ(spec->train.weight_decay, 0.01);
  EXPECT_EQ(spec->train.seed, 42u);
  EXPECT_EQ(spec->output.dir, "/r/runs/demo");
  EXPECT_EQ(spec->output.checkpoint_every_steps, 200);
}

}  // namespace
}  // namespace ringmaster::trainer
