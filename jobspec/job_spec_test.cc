#include "jobspec/job_spec.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec_test_util.h"

namespace ringmaster::trainer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::ErrorOf;
using testing_util::kFromScratch;
using testing_util::kMinimal;
using testing_util::Parse;

// A complete job, every section set (the keys of docs/job-reference.md).
constexpr char kDesignExample[] = R"(name: sst2-bert-base
model:
  init_from: models/bert-base-uncased    # HF dir; or `config:` (BertConfig fields) + `vocab:`
  num_labels: 2
  hidden_dropout_prob: 0.1                # optional overrides of config.json
  attention_probs_dropout_prob: 0.1
data:
  train: data/sst2/train.tsv
  eval: data/sst2/dev.tsv
  max_seq_len: 128
  shuffle: true                           # false: rows in file order (tests rely on it)
train:
  epochs: 3                               # or max_steps (> 0 wins)
  max_steps: 0
  global_batch_size: 32                   # samples per optimizer step, whole job
  micro_batch_size: 16                    # per rank per forward; accumulation derived
  lr: 2.0e-5
  lr_schedule: linear                     # linear (warmup then decay to 0) | constant
  warmup_ratio: 0.1                       # or warmup_steps
  weight_decay: 0.01                      # not applied to biases or LayerNorm params (HF Trainer convention)
  adam_betas: [0.9, 0.999]
  adam_eps: 1.0e-8
  max_grad_norm: 1.0                      # 0 disables clipping
  precision: auto                         # auto | fp32 | fp16 | bf16
  seed: 42
output:
  dir: runs/sst2
  checkpoint_every_steps: 500
  keep_checkpoints: 3
distributed:
  nodes: "2:4"                            # N or MIN:MAX
  procs_per_node: auto                    # auto = one per GPU, or 1 on a CPU node
  sharding: full_shard                    # full_shard | shard_grad_op | no_shard | hybrid_shard
  compression: auto                       # auto | none | fp16 | bf16 | int8 | powersgd
  backend: auto                           # auto | nccl | gloo
restart:
  max_restarts: 3                         # counted for the whole job, not per node
)";

TEST(JobSpecTest, DesignExampleParsesWithEveryValue) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kDesignExample, "sst2.yaml", "/jobs");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const JobSpec& s = *spec;
  EXPECT_EQ(s.name, "sst2-bert-base");
  EXPECT_EQ(s.source, "sst2.yaml");
  EXPECT_EQ(s.model.init_from, "/jobs/models/bert-base-uncased");
  EXPECT_FALSE(s.model.has_config);
  EXPECT_EQ(s.model.num_labels, 2);
  EXPECT_EQ(s.model.config.num_labels, 2);
  ASSERT_TRUE(s.model.hidden_dropout_prob.has_value());
  EXPECT_FLOAT_EQ(*s.model.hidden_dropout_prob, 0.1f);
  ASSERT_TRUE(s.model.attention_probs_dropout_prob.has_value());
  EXPECT_FLOAT_EQ(*s.model.attention_probs_dropout_prob, 0.1f);
  EXPECT_EQ(s.data.train, "/jobs/data/sst2/train.tsv");
  EXPECT_EQ(s.data.eval, "/jobs/data/sst2/dev.tsv");
  EXPECT_EQ(s.data.max_seq_len, 128);
  EXPECT_TRUE(s.data.shuffle);
  EXPECT_EQ(s.train.epochs, 3);
  EXPECT_EQ(s.train.max_steps, 0);
  EXPECT_EQ(s.train.global_batch_size, 32);
  EXPECT_EQ(s.train.micro_batch_size, 16);
  EXPECT_DOUBLE_EQ(s.train.lr, 2e-5);
  EXPECT_EQ(SettingName(s.train.lr_schedule), "linear");
  EXPECT_DOUBLE_EQ(s.train.warmup_ratio, 0.1);
  EXPECT_EQ(s.train.warmup_steps, 0);
  EXPECT_DOUBLE_EQ(s.train.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(s.train.adam_beta1, 0.9);
  EXPECT_DOUBLE_EQ(s.train.adam_beta2, 0.999);
  EXPECT_DOUBLE_EQ(s.train.adam_eps, 1e-8);
  EXPECT_DOUBLE_EQ(s.train.max_grad_norm, 1.0);
  EXPECT_EQ(SettingName(s.train.precision), "auto");
  EXPECT_EQ(s.train.seed, 42u);
  EXPECT_EQ(s.output.dir, "/jobs/runs/sst2");
  EXPECT_EQ(s.output.checkpoint_every_steps, 500);
  EXPECT_EQ(s.output.keep_checkpoints, 3);
  EXPECT_EQ(s.distributed.min_nodes, 2);
  EXPECT_EQ(s.distributed.max_nodes, 4);
  EXPECT_EQ(s.distributed.procs_per_node, "auto");
  EXPECT_EQ(SettingName(s.distributed.sharding), "full_shard");
  EXPECT_EQ(SettingName(s.distributed.compression), "auto");
  EXPECT_EQ(SettingName(s.distributed.backend), "auto");
  EXPECT_EQ(s.restart.max_restarts, 3);
}

TEST(JobSpecTest, DefaultsWhenOmitted) {
  absl::StatusOr<JobSpec> spec = Parse(kMinimal);
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec d;  // the struct's defaults are the documented ones
  EXPECT_EQ(spec->name, "job");
  EXPECT_EQ(spec->data.eval, "");
  EXPECT_EQ(spec->data.max_seq_len, d.data.max_seq_len);
  EXPECT_EQ(spec->train.epochs, 3);
  EXPECT_DOUBLE_EQ(spec->train.lr, 2e-5);
  EXPECT_EQ(SettingName(spec->train.device), "cpu");
  EXPECT_EQ(spec->distributed.min_nodes, 1);
  EXPECT_EQ(spec->distributed.max_nodes, 1);
  EXPECT_EQ(SettingName(spec->distributed.sharding), "no_shard");
  EXPECT_FALSE(spec->model.hidden_dropout_prob.has_value());
  // Paths stay as written without a base directory.
  EXPECT_EQ(spec->model.init_from, "models/bert");
  EXPECT_EQ(spec->data.train, "train.tsv");
}

TEST(JobSpecTest, UnknownKeyNamesPathAndPosition) {
  std::string e = ErrorOf(std::string(kMinimal) + "train:\n  lrr: 0.1\n");
  EXPECT_EQ(e, "job.yaml:8:3: unknown key 'train.lrr'; did you mean 'train.lr'?");
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "trian:\n  lr: 0.1\n"),
              HasSubstr("job.yaml:7:1: unknown key 'trian'; did you mean 'train'?"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "distributed:\n  node: 2\n"),
              HasSubstr("job.yaml:8:3: unknown key 'distributed.node'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  adam_beta1: 0.8\n"),
              HasSubstr("unknown key 'train.adam_beta1' (use adam_betas: [beta1, beta2])"));
}

TEST(JobSpecTest, WrongTypesNameKeyAndValue) {
  EXPECT_EQ(ErrorOf(std::string(kMinimal) + "train:\n  lr: fast\n"),
            "job.yaml:8:7: train.lr: expected a number, got 'fast'");
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  epochs: 1.5\n"),
              HasSubstr("train.epochs: expected an integer, got '1.5'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  epochs: [1]\n"),
              HasSubstr("train.epochs: expected an integer, got a list"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  seed: -1\n"),
              HasSubstr("train.seed: expected a non-negative integer, got '-1'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  lr:\n"),
              HasSubstr("train.lr: expected a number, got nothing (null)"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  lr: .nan\n"),
              HasSubstr("train.lr: expected a number"));
  EXPECT_THAT(ErrorOf("data:\n  train: t\n  shuffle: maybe\noutput:\n  dir: o\n"
                      "model:\n  init_from: m\n"),
              HasSubstr("job.yaml:3:12: data.shuffle: expected true or false, got 'maybe'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train: 3\n"),
              HasSubstr("job.yaml:7:8: train: expected a mapping of keys, got '3'"));
  EXPECT_THAT(ErrorOf("name: [a, b]\n" + std::string(kMinimal)),
              HasSubstr("name: expected a string, got a list"));
}

TEST(JobSpecTest, LargeIntegerAndExponentForms) {
  absl::StatusOr<JobSpec> spec =
      Parse(std::string(kMinimal) + "train:\n  max_steps: 1e4\n  seed: 18446744073709551615\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->train.max_steps, 10000);
  EXPECT_EQ(spec->train.seed, 18446744073709551615ull);
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  epochs: 99999999999\n"),
              HasSubstr("train.epochs: 99999999999 is out of range"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "distributed:\n  skip_zero_blocks: sometimes\n"),
              HasSubstr("job.yaml:8:21: distributed.skip_zero_blocks: expected true or false, got "
                        "'sometimes'"));
}

TEST(JobSpecTest, BadEnumsListAllowedValues) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  const Case cases[] = {
      {"distributed:\n  sharding: zero3\n",
       "job.yaml:8:13: distributed.sharding: 'zero3' is not one of: full_shard, shard_grad_op, "
       "no_shard, hybrid_shard"},
      {"distributed:\n  compression: zstd\n",
       "distributed.compression: 'zstd' is not one of: auto, none, fp16, bf16, int8, powersgd"},
      {"distributed:\n  backend: mpi\n",
       "distributed.backend: 'mpi' is not one of: auto, nccl, gloo"},
      {"train:\n  precision: fp8\n",
       "train.precision: 'fp8' is not one of: auto, fp32, fp16, bf16"},
      {"train:\n  device: tpu\n", "train.device: 'tpu' is not one of: cpu, cuda, auto"},
      {"train:\n  lr_schedule: cosine_with_restarts\n",
       "train.lr_schedule: 'cosine_with_restarts' is not one of: linear, constant, cosine, "
       "polynomial"},
      {"train:\n  resume: yes\n", "train.resume: 'yes' is not one of: auto, never, force"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorOf(std::string(kMinimal) + c.yaml), HasSubstr(c.error)) << c.yaml;
  }
}

TEST(JobSpecTest, RequiredFields) {
  EXPECT_THAT(ErrorOf("model:\n  init_from: m\noutput:\n  dir: o\n"),
              HasSubstr("data.train: is required"));
  EXPECT_THAT(ErrorOf("model:\n  init_from: m\ndata:\n  train: t\n"),
              HasSubstr("output.dir: is required"));
  EXPECT_THAT(ErrorOf("data:\n  train: t\noutput:\n  dir: o\n"), HasSubstr("set model.init_from"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("job.yaml: the job spec is empty"));
  EXPECT_THAT(ErrorOf("# only a comment\n"), HasSubstr("the job spec is empty"));
  EXPECT_THAT(ErrorOf("just text\n"), HasSubstr("expected a mapping of keys"));
}

// Issue #20, item 2: a NUL in a path would be checked as one path and opened as another (C calls
// stop at it); control characters would forge log lines. Every path field refuses them.
TEST(JobSpecTest, PathsRefuseControlCharacters) {
  EXPECT_THAT(ErrorOf("model:\n  init_from: m\ndata:\n  train: t\noutput:\n"
                      "  dir: \"/tmp/x/a/b\\0/../../../../srv/root/out\"\n"),
              HasSubstr("output.dir: holds a control character (byte 0x00 at offset 10)"));
  EXPECT_THAT(ErrorOf("model:\n  init_from: \"m\\nINFO forged\"\ndata:\n  train: t\noutput:\n"
                      "  dir: o\n"),
              HasSubstr("model.init_from: holds a control character (byte 0x0a"));
  EXPECT_THAT(ErrorOf("model:\n  init_from: m\ndata:\n  train: \"t\\x1b[2J\"\n  eval: \"e\\x7f\"\n"
                      "output:\n  dir: o\n"),
              AllOf(HasSubstr("data.train: holds a control character (byte 0x1b"),
                    HasSubstr("data.eval: holds a control character (byte 0x7f")));
  EXPECT_TRUE(Parse("model:\n  init_from: m\ndata:\n  train: \"caf\\u00e9 t.tsv\"\noutput:\n"
                    "  dir: o\n")
                  .ok());
}

TEST(JobSpecTest, RangeChecks) {
  struct Case {
    std::string yaml;
    std::string error;
  };
  const Case cases[] = {
      {"train:\n  adam_betas: [0.9]\n", "job.yaml:8:15: train.adam_betas: expected a list of two"},
      {"train:\n  adam_betas: 0.9\n", "train.adam_betas: expected a list of two numbers"},
      {"train:\n  adam_betas: [0.9, x]\n", "train.adam_betas[1]: expected a number, got 'x'"},
      {"train:\n  adam_betas: [0.9, 1.0]\n",
       "train.adam_betas: each beta must be in [0, 1), got [0.9, 1]"},
      {"train:\n  global_batch_size: 32\n  micro_batch_size: 12\n",
       "job.yaml:8:22: train.global_batch_size: 32 is not a multiple of train.micro_batch_size "
       "(12); "
       "gradient accumulation is derived"},
      {"train:\n  micro_batch_size: 0\n", "train.micro_batch_size: must be >= 1, got 0"},
      {"train:\n  epochs: 0\n", "train.epochs: must be >= 1 unless train.max_steps > 0, got 0"},
      {"train:\n  lr: 0\n", "job.yaml:8:7: train.lr: must be > 0, got 0"},
      {"train:\n  lr: -1e-3\n", "train.lr: must be > 0, got -0.001"},
      {"train:\n  warmup_ratio: 1.0\n", "train.warmup_ratio: must be in [0, 1), got 1"},
      {"train:\n  warmup_steps: -1\n", "train.warmup_steps: must be >= 0"},
      {"train:\n  max_steps: 10\n  warmup_steps: 10\n",
       "train.warmup_steps: 10 must be below train.max_steps (10)"},
      {"train:\n  adam_eps: 0\n", "train.adam_eps: must be > 0"},
      {"train:\n  max_grad_norm: -1\n", "train.max_grad_norm: must be >= 0"},
      {"train:\n  weight_decay: -0.1\n", "train.weight_decay: must be >= 0"},
      {"train:\n  eval_batch_size: 0\n", "train.eval_batch_size: must be >= 1"},
      {"train:\n  log_every_steps: -5\n", "train.log_every_steps: must be >= 0"},
      {"restart:\n  max_restarts: -1\n", "restart.max_restarts: must be >= 0, got -1"},
      {"name: 'my job'\n", "name: 'my job' must be 1-128 letters"},
      {"distributed:\n  backend: nccl\n",
       "distributed.backend: nccl needs train.device cuda (or auto)"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorOf(std::string(kMinimal) + c.yaml), HasSubstr(c.error)) << c.yaml;
  }
  auto with_data = [](std::string_view data_lines) {
    return "model: {init_from: m}\noutput: {dir: o}\ndata:\n  train: t\n" + std::string(data_lines);
  };
  EXPECT_THAT(ErrorOf(with_data("  max_seq_len: 1\n")),
              HasSubstr("job.yaml:5:16: data.max_seq_len: must be in [2, 8192]"));
  EXPECT_THAT(ErrorOf(with_data("  max_seq_len: 8193\n")), HasSubstr("data.max_seq_len"));
  EXPECT_TRUE(Parse(with_data("  max_seq_len: 8192\n")).ok());
  EXPECT_TRUE(Parse(with_data("  max_seq_len: 2\n")).ok());
}

TEST(JobSpecTest, MaxStepsAllowsZeroEpochs) {
  absl::StatusOr<JobSpec> spec =
      Parse(std::string(kMinimal) + "train:\n  epochs: 0\n  max_steps: 100\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->train.max_steps, 100);
}

TEST(JobSpecTest, NodesAndProcsPerNode) {
  auto nodes = [](std::string_view v) {
    return Parse(std::string(kMinimal) + "distributed:\n  nodes: " + std::string(v) + "\n");
  };
  auto n3 = nodes("3");
  ASSERT_TRUE(n3.ok()) << n3.status();
  EXPECT_EQ(n3->distributed.min_nodes, 3);
  EXPECT_EQ(n3->distributed.max_nodes, 3);
  auto n3q = nodes("\"3\"");
  ASSERT_TRUE(n3q.ok()) << n3q.status();
  EXPECT_EQ(n3q->distributed.max_nodes, 3);
  auto range = nodes("1:8");  // unquoted works too
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->distributed.min_nodes, 1);
  EXPECT_EQ(range->distributed.max_nodes, 8);
  for (std::string_view bad : {"\"0:2\"", "\"4:2\"", "0", "-1"}) {
    auto s = nodes(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("job.yaml:8:10: distributed.nodes: needs 1 <= MIN "
                          "<= MAX"))
        << bad;
  }
  for (std::string_view bad : {"\"a:b\"", "\"1:2:3\"", "[1, 2]", "two"}) {
    auto s = nodes(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("distributed.nodes: expected a node count N or a range \"MIN:MAX\""))
        << bad;
  }

  auto procs = [](std::string_view v) {
    return Parse(std::string(kMinimal) + "distributed:\n  procs_per_node: " + std::string(v) +
                 "\n");
  };
  auto p4 = procs("4");
  ASSERT_TRUE(p4.ok()) << p4.status();
  EXPECT_EQ(p4->distributed.procs_per_node, "4");
  for (std::string_view bad : {"0", "-2", "many"}) {
    auto s = procs(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("distributed.procs_per_node: must be auto or a positive integer"));
  }
}

TEST(JobSpecTest, YamlSyntaxErrorHasLine) {
  std::string e = ErrorOf("model:\n  init_from: m\ndata: [unclosed\noutput:\n  dir: o\n");
  EXPECT_THAT(e, HasSubstr("job.yaml:"));
  EXPECT_THAT(e, HasSubstr("invalid YAML"));
  std::string tab = ErrorOf("model:\n  init_from: \"m\n");
  EXPECT_THAT(tab, testing::StartsWith("job.yaml:"));
}

TEST(JobSpecTest, DuplicateKeysAreErrors) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train:\n  lr: 0.1\n  lr: 0.2\n"),
              HasSubstr("job.yaml:9:3: duplicate key 'train.lr' (first set on line 8)"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "name: a\nname: b\n"),
              HasSubstr("job.yaml:8:1: duplicate key 'name' (first set on line 7)"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "train: {lr: 1, lr: 2}\n"),
              HasSubstr("duplicate key 'train.lr'"));
}

// Regression (job_spec_fuzz): the mapping reader kept a reference to the key of yaml-cpp's
// temporary iterator pair, read after it died. Under ASan (scripts/sanitize-and-fuzz.sh) this
// failed as stack-use-after-scope on the first key; the keys and their positions must come out
// right, including non-scalar keys, which are refused with their own position.
TEST(JobSpecTest, MappingKeysOutliveTheIterator) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "name: a\nname: b\n"),
              HasSubstr("job.yaml:8:1: duplicate key 'name' (first set on line 7)"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "? [a, b]\n: 1\n"),
              HasSubstr("job.yaml:7:3: top level: keys must be plain names"));
}

TEST(JobSpecTest, ReportsAllProblemsTogether) {
  std::string e = ErrorOf(std::string(kMinimal) + "train:\n  lrr: 1\n  epochs: x\nfoo: 1\n");
  EXPECT_THAT(e, HasSubstr("unknown key 'train.lrr'"));
  EXPECT_THAT(e, HasSubstr("train.epochs: expected an integer"));
  EXPECT_THAT(e, HasSubstr("unknown key 'foo'"));
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 2) << e;
}

// Regression (job_spec_fuzz): yaml-cpp 0.7's LoadAll never returned on a stream its parser
// cannot advance past (a "," where a node should start), growing memory until killed. These
// must now be refused as invalid YAML, at once.
TEST(JobSpecTest, StuckYamlParserIsAnErrorNotAHang) {
  for (const char* text : {",", ",\n", ",a: b: a\n", "\"a\",\n", ",\nn[\n"}) {
    const std::string e = ErrorOf(text);
    EXPECT_THAT(e, testing::StartsWith("job.yaml:")) << text;
    EXPECT_THAT(e, HasSubstr("invalid YAML")) << text;
  }
  // A valid first document followed by one the parser cannot start.
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + ",\n"), HasSubstr("invalid YAML"));
}

TEST(JobSpecTest, MultipleDocumentsAreRefused) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "---\nname: other\n"),
              HasSubstr("more than one YAML document"));
}

// Every field, compared through the emitter (fixed point) and field by field where the emitter
// could hide a loss.
void ExpectRoundTrip(const JobSpec& a) {
  std::string yaml = JobSpecToYaml(a);
  absl::StatusOr<JobSpec> b = ParseJobSpec(yaml, "roundtrip.yaml", "");
  ASSERT_TRUE(b.ok()) << b.status() << "\n" << yaml;
  EXPECT_EQ(JobSpecToYaml(*b), yaml);
  EXPECT_EQ(b->name, a.name);
  EXPECT_EQ(b->model.init_from, a.model.init_from);
  EXPECT_EQ(b->model.has_config, a.model.has_config);
  EXPECT_EQ(b->model.vocab, a.model.vocab);
  EXPECT_EQ(b->model.do_lower_case, a.model.do_lower_case);
  EXPECT_EQ(b->model.num_labels, a.model.num_labels);
  EXPECT_EQ(b->model.hidden_dropout_prob, a.model.hidden_dropout_prob);
  EXPECT_EQ(b->model.attention_probs_dropout_prob, a.model.attention_probs_dropout_prob);
  const BertConfig &ca = a.model.config, &cb = b->model.config;
  if (a.model.has_config) {
    EXPECT_EQ(cb.vocab_size, ca.vocab_size);
    EXPECT_EQ(cb.hidden_size, ca.hidden_size);
    EXPECT_EQ(cb.num_hidden_layers, ca.num_hidden_layers);
    EXPECT_EQ(cb.num_attention_heads, ca.num_attention_heads);
    EXPECT_EQ(cb.intermediate_size, ca.intermediate_size);
    EXPECT_EQ(cb.max_position_embeddings, ca.max_position_embeddings);
    EXPECT_EQ(cb.type_vocab_size, ca.type_vocab_size);
    EXPECT_EQ(cb.pad_token_id, ca.pad_token_id);
    EXPECT_EQ(cb.hidden_dropout_prob, ca.hidden_dropout_prob);  // exact, not approximately
    EXPECT_EQ(cb.attention_probs_dropout_prob, ca.attention_probs_dropout_prob);
    EXPECT_EQ(cb.layer_norm_eps, ca.layer_norm_eps);
    EXPECT_EQ(cb.initializer_range, ca.initializer_range);
    EXPECT_EQ(cb.hidden_act, ca.hidden_act);
  }
  EXPECT_EQ(cb.num_labels, a.model.num_labels);
  EXPECT_EQ(b->data.train, a.data.train);
  EXPECT_EQ(b->data.eval, a.data.eval);
  EXPECT_EQ(b->data.max_seq_len, a.data.max_seq_len);
  EXPECT_EQ(b->data.shuffle, a.data.shuffle);
  const TrainSpec &ta = a.train, &tb = b->train;
  EXPECT_EQ(tb.epochs, ta.epochs);
  EXPECT_EQ(tb.max_steps, ta.max_steps);
  EXPECT_EQ(tb.global_batch_size, ta.global_batch_size);
  EXPECT_EQ(tb.micro_batch_size, ta.micro_batch_size);
  EXPECT_EQ(tb.lr, ta.lr);
  EXPECT_EQ(tb.lr_schedule, ta.lr_schedule);
  EXPECT_EQ(tb.warmup_ratio, ta.warmup_ratio);
  EXPECT_EQ(tb.warmup_steps, ta.warmup_steps);
  EXPECT_EQ(tb.weight_decay, ta.weight_decay);
  EXPECT_EQ(tb.adam_beta1, ta.adam_beta1);
  EXPECT_EQ(tb.adam_beta2, ta.adam_beta2);
  EXPECT_EQ(tb.adam_eps, ta.adam_eps);
  EXPECT_EQ(tb.max_grad_norm, ta.max_grad_norm);
  EXPECT_EQ(tb.precision, ta.precision);
  EXPECT_EQ(tb.device, ta.device);
  EXPECT_EQ(tb.seed, ta.seed);
  EXPECT_EQ(tb.eval_batch_size, ta.eval_batch_size);
  EXPECT_EQ(tb.log_every_steps, ta.log_every_steps);
  EXPECT_EQ(tb.resume, ta.resume);
  EXPECT_EQ(b->output.dir, a.output.dir);
  EXPECT_EQ(b->output.checkpoint_every_steps, a.output.checkpoint_every_steps);
  EXPECT_EQ(b->output.keep_checkpoints, a.output.keep_checkpoints);
  EXPECT_EQ(b->output.tensorboard, a.output.tensorboard);
  EXPECT_EQ(b->output.tensorboard_dir, a.output.tensorboard_dir);
  EXPECT_EQ(b->distributed.min_nodes, a.distributed.min_nodes);
  EXPECT_EQ(b->distributed.max_nodes, a.distributed.max_nodes);
  EXPECT_EQ(b->distributed.procs_per_node, a.distributed.procs_per_node);
  EXPECT_EQ(b->distributed.sharding, a.distributed.sharding);
  EXPECT_EQ(b->distributed.compression, a.distributed.compression);
  EXPECT_EQ(b->distributed.backend, a.distributed.backend);
  EXPECT_EQ(b->distributed.powersgd_rank, a.distributed.powersgd_rank);
  EXPECT_EQ(b->distributed.powersgd_start_step, a.distributed.powersgd_start_step);
  EXPECT_EQ(b->distributed.skip_zero_blocks, a.distributed.skip_zero_blocks);
  EXPECT_EQ(b->distributed.bucket_cap_mb, a.distributed.bucket_cap_mb);
  EXPECT_EQ(b->restart.max_restarts, a.restart.max_restarts);
}

TEST(JobSpecTest, SkipZeroBlocksDefaultsOnAndRoundTripsOff) {
  absl::StatusOr<JobSpec> on = ParseJobSpec(kMinimal, "job.yaml", "/jobs");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->distributed.skip_zero_blocks);
  absl::StatusOr<JobSpec> off = ParseJobSpec(
      std::string(kMinimal) + "distributed:\n  skip_zero_blocks: false\n", "job.yaml", "/jobs");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->distributed.skip_zero_blocks);
  ExpectRoundTrip(*off);
}

TEST(JobSpecTest, RoundTripDesignExample) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kDesignExample, "sst2.yaml", "/jobs");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectRoundTrip(*spec);
}

TEST(JobSpecTest, RoundTripUnusualValues) {
  absl::StatusOr<JobSpec> parsed = Parse(kFromScratch);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  JobSpec s = *parsed;
  s.name = "true";  // a YAML word: must come back as a string
  s.model.config.vocab_size = 321;
  s.model.config.layer_norm_eps = 1e-12f;
  s.model.config.hidden_dropout_prob = 0.1f;
  s.model.config.initializer_range = 0.02f;
  s.model.vocab = "/data/my vocab: v1.txt";
  s.model.do_lower_case = false;
  s.data.train = "/d/null";
  s.data.eval = "123";
  s.data.shuffle = false;
  s.train.lr = 0.1 + 0.2;  // needs all 17 digits
  s.train.adam_beta2 = 0.98;
  s.train.max_steps = 12345;
  s.train.warmup_steps = 100;
  s.train.precision = Precision::kBf16;
  s.train.device = Device::kCuda;
  s.train.seed = 18446744073709551615ull;
  s.train.log_every_steps = 7;
  s.train.resume = ResumeMode::kNever;
  s.output.dir = "/out/#notacomment";
  s.distributed.min_nodes = 2;
  s.distributed.max_nodes = 5;
  s.distributed.procs_per_node = "8";
  s.distributed.backend = Backend::kNccl;
  s.distributed.compression = Compression::kPowerSgd;
  s.distributed.sharding = Sharding::kHybridShard;
  s.restart.max_restarts = 0;
  ASSERT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);
  ExpectRoundTrip(s);
  std::string yaml = JobSpecToYaml(s);
  EXPECT_THAT(yaml, HasSubstr("lr: 0.30000000000000004"));
  EXPECT_THAT(yaml, HasSubstr("layer_norm_eps: 1e-12"));
}

TEST(JobSpecTest, RelativePathsResolveAgainstBaseDir) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(
      "model:\n  init_from: ../models/bert\ndata:\n  train: /abs/train.tsv\n  eval: ./dev.tsv\n"
      "output:\n  dir: runs/x\n",
      "job.yaml", "/home/u/jobs");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model.init_from, "/home/u/models/bert");
  EXPECT_EQ(spec->data.train, "/abs/train.tsv");  // absolute paths are kept
  EXPECT_EQ(spec->data.eval, "/home/u/jobs/dev.tsv");
  EXPECT_EQ(spec->output.dir, "/home/u/jobs/runs/x");

  absl::StatusOr<JobSpec> scratch = ParseJobSpec(kFromScratch, "j.yaml", "/base");
  ASSERT_TRUE(scratch.ok()) << scratch.status();
  EXPECT_EQ(scratch->model.vocab, "/base/vocab.txt");
}

TEST(JobSpecTest, LoadJobSpecResolvesAgainstFileDirectory) {
  std::string dir = ::testing::TempDir() + "/job_spec_test_" + std::to_string(::getpid());
  ASSERT_TRUE(MakeDirs(dir + "/sub").ok());
  std::string path = dir + "/sub/job.yaml";
  ASSERT_TRUE(WriteFileAtomic(path, kMinimal).ok());
  absl::StatusOr<JobSpec> spec = LoadJobSpec(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::string abs_sub = std::filesystem::absolute(dir + "/sub").lexically_normal().string();
  EXPECT_EQ(spec->data.train, abs_sub + "/train.tsv");
  EXPECT_EQ(spec->output.dir, abs_sub + "/out");
  EXPECT_EQ(spec->source, path);

  ASSERT_TRUE(WriteFileAtomic(path, std::string(kMinimal) + "bogus: 1\n").ok());
  absl::StatusOr<JobSpec> bad = LoadJobSpec(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path + ":7:1: unknown key 'bogus'"));

  absl::StatusOr<JobSpec> missing = LoadJobSpec(dir + "/nope.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope.yaml"));
  std::filesystem::remove_all(dir);
}

TEST(JobSpecTest, MisspeltDeviceDoesNotAlsoFailTheBackendCheck) {
  // A misspelt train.device keeps its default (cpu) internally; the nccl-needs-a-GPU check must
  // not then report a device the user never wrote.
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(std::string(kMinimal) + "train:\n  device: tpu\ndistributed:\n  backend: nccl\n",
                   "job.yaml", "");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("train.device: 'tpu' is not one of"));
  EXPECT_THAT(std::string(spec.status().message()), Not(HasSubstr("nccl needs")));
}

TEST(JobSpecTest, ValidateJobSpecOnBuiltSpec) {
  JobSpec s;
  s.source = "built";
  s.model.init_from = "m";
  s.data.train = "t";
  s.output.dir = "o";
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s);
  s.train.micro_batch_size = 5;
  // A misspelt enum setting cannot be built any more (the fields are enums); a free-form one can.
  s.distributed.procs_per_node = "everything";
  absl::Status st = ValidateJobSpec(s);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("built: train.global_batch_size: 32 is not a multiple"));
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("built: distributed.procs_per_node: must be auto or a positive integer, "
                        "got 'everything'"));
  EXPECT_THAT(std::string(st.message()), Not(HasSubstr("built:0")));
}

}  // namespace
TEST(JobSpecTest, BucketCapDefaultsToPerUnitAndAppliesOnlyToNoShard) {
  absl::StatusOr<JobSpec> def = ParseJobSpec(kMinimal, "job.yaml", "/jobs");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->distributed.bucket_cap_mb, 0);
  absl::StatusOr<JobSpec> on = ParseJobSpec(
      std::string(kMinimal) + "distributed:\n  bucket_cap_mb: 12.5\n", "job.yaml", "/jobs");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->distributed.bucket_cap_mb, 12.5);
  ExpectRoundTrip(*on);
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "distributed:\n  bucket_cap_mb: -1\n"),
              HasSubstr("distributed.bucket_cap_mb: must be a number >= 0"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "distributed:\n  bucket_cap_mb: lots\n"),
              HasSubstr("distributed.bucket_cap_mb: expected a number"));
  // The sharded modes reduce per unit: a cap there is refused, naming the key and the mode.
  EXPECT_THAT(ErrorOf(std::string(kMinimal) +
                      "distributed:\n  sharding: full_shard\n  bucket_cap_mb: 25\n"),
              HasSubstr("distributed.bucket_cap_mb: buckets only no_shard's gradient "
                        "all-reduces; sharding full_shard"));
  absl::StatusOr<JobSpec> zero = ParseJobSpec(std::string(kMinimal) +
                                                  "distributed:\n  sharding: full_shard\n  "
                                                  "bucket_cap_mb: 0\n",
                                              "job.yaml", "/jobs");
  EXPECT_TRUE(zero.ok()) << zero.status();
}

}  // namespace ringmaster::trainer

namespace ringmaster::trainer {
namespace {

// Issue #32: unknown keys, wrong types, misspelt settings and out-of-range values in one pass
// (before, range checks ran only once the file had no key or type error: two runs to see all).
TEST(JobSpecTest, EveryKindOfMistakeInOnePass) {
  const std::string e = ErrorOf(std::string(kMinimal) +
                                "train:\n"
                                "  lr_schedule: cosin\n"       // line 8
                                "  eval_steps: -5\n"           // line 9
                                "  warmup_ratioo: 0.1\n"       // line 10
                                "  micro_batch_size: lots\n"   // line 11
                                "  global_batch_size: 12\n");  // line 12
  EXPECT_THAT(e, HasSubstr("job.yaml:8:16: train.lr_schedule: 'cosin' is not one of"));
  EXPECT_THAT(e, HasSubstr("job.yaml:9:15: train.eval_steps: must be >= 0, got -5"));
  EXPECT_THAT(e, HasSubstr("job.yaml:10:3: unknown key 'train.warmup_ratioo'"));
  EXPECT_THAT(e, HasSubstr("job.yaml:11:21: train.micro_batch_size: expected an integer"));
  // The unreadable value is not checked again against the default it kept, alone or against
  // another setting (global_batch_size 12 is no multiple of the default micro-batch, 8).
  EXPECT_THAT(e, Not(HasSubstr("micro_batch_size: must be")));
  EXPECT_THAT(e, Not(HasSubstr("is not a multiple of train.micro_batch_size")));
}

TEST(JobSpecTest, UnreadableSectionIsNotCheckedAgain) {
  const std::string e = ErrorOf(
      "model:\n  config: {hidden_size: big, num_hidden_layers: 1, num_attention_heads: 5,\n"
      "           intermediate_size: 32}\n  vocab: v.txt\ndata: {train: t.tsv}\n"
      "output: [a]\ntrain: {epochs: -1}\n");
  EXPECT_THAT(e, HasSubstr("model.config.hidden_size: expected an integer"));
  EXPECT_THAT(e, HasSubstr("output: expected a mapping of keys"));
  EXPECT_THAT(e, HasSubstr("train.epochs: must be >= 1"));
  // output.dir is "missing" only because output could not be read; model.config's other checks
  // would judge the default hidden size (768, not a multiple of 5 heads).
  EXPECT_THAT(e, Not(HasSubstr("output.dir")));
  EXPECT_THAT(e, Not(HasSubstr("num_attention_heads 5")));
}

}  // namespace
}  // namespace ringmaster::trainer
