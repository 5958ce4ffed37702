// ctest-labels: unit
// The job spec's model section: an inline config or one from init_from, its errors naming the
// key, the size limits, the dropout override.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec.h"
#include "jobspec/job_spec_test_util.h"

namespace ringmaster::trainer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::ErrorOf;
using testing_util::kFromScratch;
using testing_util::Parse;

TEST(JobSpecTest, ModelConfigFromScratch) {
  absl::StatusOr<JobSpec> spec = Parse(kFromScratch);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModelSpec& m = spec->model;
  EXPECT_TRUE(m.has_config);
  EXPECT_EQ(m.config.vocab_size, 0);
  EXPECT_EQ(m.config.hidden_size, 64);
  EXPECT_EQ(m.config.num_hidden_layers, 2);
  EXPECT_EQ(m.config.num_attention_heads, 4);
  EXPECT_EQ(m.config.intermediate_size, 128);
  EXPECT_EQ(m.config.max_position_embeddings, 64);
  EXPECT_EQ(m.config.num_labels, 3);
  EXPECT_EQ(m.num_labels, 3);
  EXPECT_EQ(m.vocab, "vocab.txt");
}

TEST(JobSpecTest, ModelConfigAllFields) {
  absl::StatusOr<JobSpec> spec = Parse(R"(model:
  config:
    vocab_size: 1000
    hidden_size: 32
    num_hidden_layers: 1
    num_attention_heads: 2
    intermediate_size: 64
    max_position_embeddings: 128
    type_vocab_size: 1
    hidden_dropout_prob: 0.2
    attention_probs_dropout_prob: 0.3
    layer_norm_eps: 1.0e-5
    initializer_range: 0.05
    hidden_act: gelu
    pad_token_id: 1
  vocab: v.txt
  do_lower_case: false
data: {train: t.tsv}
output: {dir: o}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const BertConfig& c = spec->model.config;
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.type_vocab_size, 1);
  EXPECT_FLOAT_EQ(c.hidden_dropout_prob, 0.2f);
  EXPECT_FLOAT_EQ(c.attention_probs_dropout_prob, 0.3f);
  EXPECT_FLOAT_EQ(c.layer_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.initializer_range, 0.05f);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_FALSE(spec->model.do_lower_case);
}

// model.tokenizer_compat: slow by default, fast when asked, printed back by JobSpecToYaml; any
// other value is an error naming the key, its line and the allowed values.
TEST(JobSpecTest, TokenizerCompat) {
  absl::StatusOr<JobSpec> plain = Parse(kFromScratch);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->model.tokenizer_compat, TokenizerCompat::kSlow);
  std::string fast = kFromScratch;
  fast.insert(fast.find("  num_labels:"), "  tokenizer_compat: fast\n");
  absl::StatusOr<JobSpec> spec = Parse(fast);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.tokenizer_compat, TokenizerCompat::kFast);
  absl::StatusOr<JobSpec> back = Parse(JobSpecToYaml(*spec));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model.tokenizer_compat, TokenizerCompat::kFast);
  // With init_from too.
  std::string init = testing_util::kMinimal;
  init.insert(init.find("data:"), "  tokenizer_compat: fast\n");
  ASSERT_TRUE(Parse(init).ok());
  EXPECT_EQ(Parse(init)->model.tokenizer_compat, TokenizerCompat::kFast);

  std::string bad = kFromScratch;
  bad.insert(bad.find("  num_labels:"), "  tokenizer_compat: rust\n");
  EXPECT_THAT(ErrorOf(bad),
              HasSubstr("job.yaml:9:21: model.tokenizer_compat: 'rust' is not one of: slow, fast"));
  std::string not_string = kFromScratch;
  not_string.insert(not_string.find("  num_labels:"), "  tokenizer_compat: [fast]\n");
  EXPECT_THAT(ErrorOf(not_string), HasSubstr("model.tokenizer_compat"));
}

TEST(JobSpecTest, ModelErrors) {
  std::string scratch = kFromScratch;
  // Unknown key inside config, with a hint for the common one.
  std::string with_num_labels = scratch;
  with_num_labels.insert(with_num_labels.find("  vocab:"), "    num_labels: 2\n");
  EXPECT_THAT(ErrorOf(with_num_labels),
              HasSubstr("job.yaml:8:5: unknown key 'model.config.num_labels' (set model.num_labels "
                        "instead)"));
  std::string typo = scratch;
  typo.insert(typo.find("  vocab:"), "    hiden_size: 2\n");
  EXPECT_THAT(ErrorOf(typo), HasSubstr("unknown key 'model.config.hiden_size'"));
  // Required architecture sizes.
  std::string no_layers = scratch;
  no_layers.erase(no_layers.find("    num_hidden_layers: 2\n"), 25);
  EXPECT_THAT(ErrorOf(no_layers), HasSubstr("job.yaml:3:5: model.config.num_hidden_layers is "
                                            "required"));
  EXPECT_THAT(ErrorOf("model:\n  config:\n  vocab: v\ndata: {train: t}\noutput: {dir: o}\n"),
              HasSubstr("model.config.hidden_size is required"));
  // Vocab must come with config.
  std::string no_vocab = scratch;
  no_vocab.erase(no_vocab.find("  vocab: vocab.txt\n"), 19);
  EXPECT_THAT(ErrorOf(no_vocab), HasSubstr("model.vocab: is required with model.config"));
  // ...and not with init_from.
  EXPECT_THAT(
      ErrorOf("model:\n  init_from: m\n  vocab: v.txt\ndata: {train: t}\noutput: {dir: o}\n"),
      HasSubstr("job.yaml:3:10: model.vocab: is only used with model.config"));
  // Both sources.
  std::string both = scratch;
  both.insert(both.find("  vocab:"), "  init_from: m\n");
  EXPECT_THAT(ErrorOf(both), HasSubstr("model.init_from and model.config are both set"));
  // BertConfig's own checks, positioned at the config block.
  std::string heads = scratch;
  heads.replace(heads.find("num_attention_heads: 4"), 22, "num_attention_heads: 5");
  EXPECT_THAT(ErrorOf(heads), HasSubstr("job.yaml:3:5: model.config"));
  EXPECT_THAT(ErrorOf(heads), HasSubstr("not a multiple of num_attention_heads"));
  // Sequence length must fit the position table.
  std::string too_long = scratch;
  too_long.replace(too_long.find("max_seq_len: 32"), 15, "max_seq_len: 65");
  EXPECT_THAT(ErrorOf(too_long),
              HasSubstr("data.max_seq_len: 65 is over model.config.max_position_embeddings (64)"));
  // A dropout in both places is ambiguous.
  std::string twice = scratch;
  twice.insert(twice.find("  vocab:"),
               "    hidden_dropout_prob: 0.2\n  hidden_dropout_prob: 0.3\n");
  EXPECT_THAT(ErrorOf(twice), HasSubstr("are both set; set it in one place"));
  EXPECT_THAT(
      ErrorOf("model:\n  init_from: m\n  num_labels: 0\ndata: {train: t}\noutput: {dir: o}\n"),
      HasSubstr("job.yaml:3:15: model.num_labels: must be at least 1"));
  EXPECT_THAT(ErrorOf("model:\n  init_from: m\n  hidden_dropout_prob: 1.5\ndata: {train: "
                      "t}\noutput: {dir: o}\n"),
              HasSubstr("model.hidden_dropout_prob: must be in [0, 1), got 1.5"));
}

TEST(JobSpecTest, ModelSizeLimits) {
  std::string huge = kFromScratch;
  huge.replace(huge.find("hidden_size: 64"), 15, "hidden_size: 1048576");
  EXPECT_THAT(ErrorOf(huge),
              HasSubstr("model.config: hidden_size 1048576 is over the limit of 16384"));
  // Every dimension within its limit, the whole over the per-rank memory cap: 16384 hidden, 256
  // layers, 65536 intermediate is ~825e9 parameters, 12 TiB of state on one rank.
  std::string big = kFromScratch;
  big.replace(big.find("hidden_size: 64"), 15, "hidden_size: 16384");
  big.replace(big.find("num_hidden_layers: 2"), 20, "num_hidden_layers: 256");
  big.replace(big.find("intermediate_size: 128"), 22, "intermediate_size: 65536");
  EXPECT_THAT(ErrorOf(big), AllOf(HasSubstr("GiB per rank with distributed.sharding no_shard"),
                                  HasSubstr("over the limit of 256 GiB per rank")));
}

TEST(JobSpecTest, DropoutOverrideFoldsIntoInlineConfig) {
  std::string scratch = kFromScratch;
  scratch.insert(scratch.find("  vocab:"), "  hidden_dropout_prob: 0.25\n");
  absl::StatusOr<JobSpec> spec = Parse(scratch);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FLOAT_EQ(spec->model.config.hidden_dropout_prob, 0.25f);
  EXPECT_FALSE(spec->model.hidden_dropout_prob.has_value());
}

}  // namespace
}  // namespace ringmaster::trainer
