// ctest-labels: unit
// metrics.jsonl lines as TensorBoard scalars: the HF Trainer's tags, and where they go.
// (tests/trainer_tensorboard.sh checks whole runs with TensorBoard's own reader.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "trainer/train/train_loop.h"

namespace ringmaster::trainer {
namespace {

using ::testing::UnorderedElementsAre;

std::vector<std::pair<std::string, float>> Tags(const nlohmann::json& line) {
  std::vector<std::pair<std::string, float>> out;
  for (const ScalarValue& v : TensorBoardScalars(line)) out.emplace_back(v.tag, v.value);
  return out;
}

TEST(TensorBoardScalarsTest, StepLineUnderTrainTags) {
  const nlohmann::json line = {{"step", 7},      {"epoch", 2},       {"loss", 0.25},
                               {"lr", 1e-3},     {"grad_norm", 1.5}, {"loss_scale", 1024.0},
                               {"skipped", true}};
  EXPECT_THAT(Tags(line),
              UnorderedElementsAre(std::pair<std::string, float>{"train/epoch", 2.0f},
                                   std::pair<std::string, float>{"train/loss", 0.25f},
                                   std::pair<std::string, float>{"train/learning_rate", 1e-3f},
                                   std::pair<std::string, float>{"train/grad_norm", 1.5f},
                                   std::pair<std::string, float>{"train/loss_scale", 1024.0f}));
}

TEST(TensorBoardScalarsTest, EvalLineUnderEvalTagsWithoutEpoch) {
  const nlohmann::json line = {{"step", 10},       {"epoch", 1},
                               {"eval_loss", 0.5}, {"eval_accuracy", 0.75},
                               {"eval_f1", 0.8},   {"eval_matthews_correlation", 0.5}};
  EXPECT_THAT(Tags(line), UnorderedElementsAre(
                              std::pair<std::string, float>{"eval/loss", 0.5f},
                              std::pair<std::string, float>{"eval/accuracy", 0.75f},
                              std::pair<std::string, float>{"eval/f1", 0.8f},
                              std::pair<std::string, float>{"eval/matthews_correlation", 0.5f}));
}

TEST(TensorBoardScalarsTest, DirectoryDefaultsToRunsInOutputDir) {
  JobSpec job;
  job.output.dir = "/out/job";
  EXPECT_EQ(TensorBoardDir(job), "/out/job/runs");
  job.output.tensorboard_dir = "/tb/job";
  EXPECT_EQ(TensorBoardDir(job), "/tb/job");
}

}  // namespace
}  // namespace ringmaster::trainer
