#include "cli/local_cluster.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::cli {
namespace {

TEST(LocalCluster, OverridesNodesAndProcsPerNodeOnly) {
  absl::StatusOr<std::string> y = OverrideDistributed(
      "name: j\ntrain: {max_steps: 3}\ndistributed: {nodes: 4, sharding: full_shard}\n", 2, 3);
  ASSERT_TRUE(y.ok()) << y.status();
  YAML::Node n = YAML::Load(*y);
  EXPECT_EQ(n["name"].as<std::string>(), "j");
  EXPECT_EQ(n["train"]["max_steps"].as<int>(), 3);
  EXPECT_EQ(n["distributed"]["nodes"].as<int>(), 2);
  EXPECT_EQ(n["distributed"]["procs_per_node"].as<int>(), 3);
  EXPECT_EQ(n["distributed"]["sharding"].as<std::string>(), "full_shard");
  absl::StatusOr<std::string> added = OverrideDistributed("name: j\n", 1, 1);
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(YAML::Load(*added)["distributed"]["nodes"].as<int>(), 1);
  EXPECT_FALSE(OverrideDistributed("- a\n- b\n", 1, 1).ok());
  EXPECT_FALSE(OverrideDistributed("distributed: 3\n", 1, 1).ok());
}

TEST(LocalCluster, ReachCommandsNameTheCoordinatorAndTheJob) {
  const std::vector<std::string> lines =
      ReachCommands("/opt/rm/ringmaster", "127.0.0.1:41234", "job-7");
  EXPECT_THAT(lines, testing::ElementsAre("/opt/rm/ringmaster status job-7 --coordinator "
                                          "127.0.0.1:41234 --insecure-loopback",
                                          "/opt/rm/ringmaster logs job-7 --rank 0 --coordinator "
                                          "127.0.0.1:41234 --insecure-loopback"));
}

TEST(LocalCluster, LeavesTheJobsDistributedKeysWithoutFlags) {
  const std::string job = "name: j\ndistributed: {nodes: \"2:3\", procs_per_node: 4}\n";
  absl::StatusOr<std::string> y = OverrideDistributed(job, std::nullopt, std::nullopt);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(YAML::Load(*y)["distributed"]["nodes"].as<std::string>(), "2:3");
  EXPECT_EQ(YAML::Load(*y)["distributed"]["procs_per_node"].as<int>(), 4);
}

TEST(LocalCluster, RunsTheJobsShapeUnlessAFlagOverridesItAndSaysSo) {
  trainer::JobSpec job;
  job.distributed.min_nodes = 2;
  job.distributed.max_nodes = 3;
  job.distributed.procs_per_node = "2";
  LocalOptions o;
  LocalShape s = ShapeOf(job, o);
  EXPECT_EQ(s.nodes, 3);  // an elastic job gets its most
  EXPECT_EQ(s.procs, "2");
  EXPECT_EQ(s.procs_estimate, 2);
  EXPECT_TRUE(s.overrides.empty());
  o.nodes = 1;
  o.procs_per_node = 2;  // the job's own: not an override
  s = ShapeOf(job, o);
  EXPECT_EQ(s.nodes, 1);
  EXPECT_THAT(s.overrides,
              ::testing::ElementsAre("--nodes 1 overrides the job's distributed.nodes 2:3"));
  job.distributed.procs_per_node = "auto";
  o = LocalOptions{};
  o.gpus = "4xNVIDIA H200:sm_90:141GiB";
  s = ShapeOf(job, o);
  EXPECT_EQ(s.procs, "auto");
  EXPECT_EQ(s.procs_estimate, 4);  // one per GPU
  o.procs_per_node = 1;
  EXPECT_THAT(ShapeOf(job, o).overrides,
              ::testing::ElementsAre(
                  "--procs-per-node 1 overrides the job's distributed.procs_per_node auto"));
}

// The summary `ringmaster local` prints is the last evaluation line's, with its step.
TEST(LocalCluster, SummarisesTheLastEvaluationWithItsStep) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("local_cluster_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  EXPECT_EQ(LastEvalSummary(path), "");  // no file
  ASSERT_TRUE(
      WriteFileAtomic(path,
                      "{\"step\":1,\"epoch\":1,\"loss\":0.7}\n"
                      "{\"step\":2,\"epoch\":1,\"eval_loss\":0.5,\"eval_accuracy\":0.57}\n"
                      "{\"step\":3,\"epoch\":2,\"loss\":0.4}\n"
                      "{\"step\":3,\"epoch\":2,\"eval_loss\":0.25,\"eval_accuracy\":0.575}\n")
          .ok());
  EXPECT_EQ(LastEvalSummary(path), "dev accuracy 0.5750 (eval loss 0.2500, step 3)");
  // train.load_best_model_at_end: the exported model is step 2's, not the last evaluated.
  ASSERT_TRUE(WriteFileAtomic(path,
                              "{\"step\":2,\"epoch\":1,\"eval_loss\":0.5,\"eval_accuracy\":0.6}\n"
                              "{\"step\":4,\"epoch\":2,\"eval_loss\":0.7,\"eval_accuracy\":0.55}\n"
                              "{\"step\":4,\"best_model_step\":2,\"metric_for_best_model\":"
                              "\"eval_accuracy\",\"best_metric\":0.6}\n")
                  .ok());
  EXPECT_EQ(LastEvalSummary(path),
            "dev accuracy 0.6000 (eval loss 0.5000, step 2, the best by eval_accuracy)");
  ASSERT_TRUE(WriteFileAtomic(path, "{\"step\":9,\"eval_loss\":1.5}\n").ok());  // regression
  EXPECT_EQ(LastEvalSummary(path), "eval loss 1.5000 (step 9)");
  ASSERT_TRUE(WriteFileAtomic(path, "{\"step\":1,\"loss\":0.7}\n").ok());
  EXPECT_EQ(LastEvalSummary(path), "");
  std::filesystem::remove_all(dir);
}

TEST(LocalCluster, MetricsAddressesFollowTheBasePort) {
  EXPECT_EQ(LocalMetricsAddress(9400, -1), "127.0.0.1:9400");
  EXPECT_EQ(LocalMetricsAddress(9400, 0), "127.0.0.1:9401");
  EXPECT_EQ(LocalMetricsAddress(9400, 2), "127.0.0.1:9403");
}

TEST(LocalCluster, FindsAFreePort) {
  absl::StatusOr<int> p = FreeLoopbackPort();
  ASSERT_TRUE(p.ok());
  EXPECT_GT(*p, 0);
  EXPECT_LT(*p, 65536);
}

TEST(LocalCluster, DemoJobHasAbsolutePathsAndItsData) {
  char tmpl[] = "/tmp/demo_job_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  absl::StatusOr<std::string> path = PrepareDemoJob(root);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, root + "/runs/demo/job.yaml");
  // The job parses from anywhere and names the generated files.
  absl::StatusOr<trainer::JobSpec> spec = trainer::LoadJobSpec(*path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data.train, root + "/runs/demo/data/train.tsv");
  EXPECT_EQ(spec->output.dir, root + "/runs/demo");
  EXPECT_TRUE(std::filesystem::exists(spec->data.train));
  EXPECT_TRUE(std::filesystem::exists(spec->model.vocab));
  // A second call keeps the data it made.
  const auto written = std::filesystem::last_write_time(spec->data.train);
  ASSERT_TRUE(PrepareDemoJob(root).ok());
  EXPECT_EQ(std::filesystem::last_write_time(spec->data.train), written);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ringmaster::cli
