// ctest-labels: gpu
// The CUDA step engine through the StepEngine interface: it trains, its checkpoints are the CPU
// engine's format (a GPU checkpoint resumes in the CPU engine bit for bit, and the other way
// round), evaluation returns the CPU model's logits, and a world of several ranks is refused.
// Skips cleanly (exit 77) where no CUDA device exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "trainer/cuda/engine/cuda_engine.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/bert_model.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/train/cpu_engine.h"

namespace ringmaster::trainer::cuda {
namespace {

BertConfig SmallConfig() {
  BertConfig c;
  c.vocab_size = 41;
  c.hidden_size = 16;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 8;
  c.num_labels = 2;
  return c;
}

Batch MakeTrainBatch(uint32_t seed) {
  Batch b;
  b.batch_size = 3;
  b.seq_len = 6;
  std::mt19937 rng(seed);
  for (int i = 0; i < b.batch_size * b.seq_len; ++i) {
    b.input_ids.push_back(1 + static_cast<int32_t>(rng() % 40));
    b.attention_mask.push_back(1.0f);
    b.token_type_ids.push_back(0);
  }
  for (int i = 0; i < b.batch_size; ++i) b.labels.push_back(static_cast<float>(rng() % 2));
  return b;
}

std::string TempDir(const std::string& name) {
  // Per process: CTest runs this binary twice at once (eager and lazy streams).
  const std::string dir =
      testing::TempDir() + "/cuda_engine_test_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

class CudaEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    config_ = SmallConfig();
    layout_ = MakeBertParamLayout(config_);
    initial_.resize(layout_.total);
    InitBertParams(config_, layout_, 9, initial_.data());
    absl::StatusOr<DistEnv> env = ParseDistEnv([](const char*) { return std::nullopt; });
    ASSERT_TRUE(env.ok()) << env.status();
    auto dist = DistContext::Create(*env, false, absl::Seconds(10));
    ASSERT_TRUE(dist.ok()) << dist.status();
    dist_ = std::move(*dist);
  }
  std::unique_ptr<CpuEngine> MakeCpuEngine() {
    CpuEngineOptions o;
    auto e = CpuEngine::Create(o, config_, layout_, initial_.data(), 10, 0, *dist_);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  void TrainSteps(StepEngine& e, int steps) {
    for (int s = 0; s < steps; ++s) {
      e.BeginStep();
      const absl::StatusOr<float> loss = e.TrainMicroBatch(MakeTrainBatch(s), {true, 1.0f, 77});
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE(std::isfinite(*loss));
      const absl::StatusOr<StepTotals> t = e.FinishStep(*loss, 1e-3, 1.0, 0.0f);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_DOUBLE_EQ(t->loss, *loss);
      EXPECT_GT(t->grad_norm, 0.0);
    }
  }

  BertConfig config_;
  ParamLayout layout_;
  std::vector<float> initial_;
  std::unique_ptr<DistContext> dist_;
};

TEST_F(CudaEngineTest, CheckpointsMoveBetweenGpuAndCpuEngines) {
  auto gpu = CudaEngine::Create(CudaTrainerOptions{}, config_, layout_, initial_.data());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  TrainSteps(**gpu, 2);
  std::vector<float> gpu_params;
  ASSERT_TRUE((*gpu)->GatherFullParams(&gpu_params).ok());
  EXPECT_NE(gpu_params, initial_);  // it trained

  // GPU → CPU: the CPU engine resumes with exactly the GPU's weights and optimizer step.
  const std::string dir = TempDir("g2c");
  CheckpointMeta pos;
  pos.step = 2;
  ASSERT_TRUE((*gpu)->SaveCheckpoint(dir, pos, 2).ok());
  const std::vector<std::string> saved = ListShardedCheckpoints(dir);
  ASSERT_EQ(saved.size(), 1u);
  std::unique_ptr<CpuEngine> cpu = MakeCpuEngine();
  ASSERT_NE(cpu, nullptr);
  absl::StatusOr<LoadedShard> shard = cpu->ReadCheckpoint(saved[0]);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->meta.step, 2);
  ASSERT_TRUE(cpu->LoadCheckpoint(*shard).ok());
  std::vector<float> cpu_params;
  ASSERT_TRUE(cpu->GatherFullParams(&cpu_params).ok());
  EXPECT_EQ(cpu_params, gpu_params);

  // CPU → GPU: one more CPU step, saved, loaded into a fresh CUDA engine: same weights.
  TrainSteps(*cpu, 1);
  ASSERT_TRUE(cpu->GatherFullParams(&cpu_params).ok());
  const std::string dir2 = TempDir("c2g");
  pos.step = 3;
  ASSERT_TRUE(cpu->SaveCheckpoint(dir2, pos, 2).ok());
  auto gpu2 = CudaEngine::Create(CudaTrainerOptions{}, config_, layout_, initial_.data());
  ASSERT_TRUE(gpu2.ok());
  shard = (*gpu2)->ReadCheckpoint(ListShardedCheckpoints(dir2).at(0));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_TRUE((*gpu2)->LoadCheckpoint(*shard).ok());
  std::vector<float> gpu2_params;
  ASSERT_TRUE((*gpu2)->GatherFullParams(&gpu2_params).ok());
  EXPECT_EQ(gpu2_params, cpu_params);

  // Evaluation: the CPU model's logits on the loaded weights.
  const Batch eval = MakeTrainBatch(42);
  absl::StatusOr<ForwardOutput> out = (*gpu2)->EvalForward(eval);
  ASSERT_TRUE(out.ok()) << out.status();
  BertModel<float> ref(config_, layout_);
  const float ref_loss =
      ref.Forward(cpu_params.data(),
                  {eval.batch_size, eval.seq_len, eval.input_ids.data(), eval.token_type_ids.data(),
                   eval.attention_mask.data(), eval.labels.data()},
                  false, 0);
  // The emulator's exact GEMMs give 1e-5; a real GPU's summation order kGpuLogitTolerance
  // (derived in gpu_test_tolerance.h).
  const double tol = GpuTolerance(1e-5, kGpuLogitTolerance);
  EXPECT_NEAR(out->loss, ref_loss,
              GpuTolerance(1e-5, kGpuLogitTolerance * std::max(1.0f, std::abs(ref_loss))));
  ASSERT_EQ(out->logits.size(), ref.logits().size());
  for (size_t i = 0; i < ref.logits().size(); ++i) {
    EXPECT_NEAR(out->logits[i], ref.logits()[i], tol) << i;
  }
}

// The engine reports its device memory (state + arena, peak) and the GPU time of its steps.
TEST_F(CudaEngineTest, ReportsDeviceMemoryAndGpuStepTime) {
  auto gpu = CudaEngine::Create(CudaTrainerOptions{}, config_, layout_, initial_.data());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const EngineFigures before = (*gpu)->figures();
  ASSERT_TRUE(before.device.has_value());
  EXPECT_EQ(before.device->arena_bytes, 0u);  // no forward yet
  EXPECT_EQ(before.device->busy_seconds_total, 0.0);
  const uint64_t state_bytes = 4 * layout_.total * sizeof(float);  // params, grads, 2 moments
  EXPECT_GE(before.device->allocated_bytes, state_bytes);

  TrainSteps(**gpu, 1);
  std::vector<float> sync;
  ASSERT_TRUE((*gpu)->GatherFullParams(&sync).ok());  // the step's kernels have finished
  const EngineFigures one = (*gpu)->figures();
  ASSERT_TRUE(one.device.has_value());
  EXPECT_GT(one.device->arena_bytes, 0u);
  EXPECT_EQ(one.device->allocated_bytes, before.device->allocated_bytes + one.device->arena_bytes);
  EXPECT_GE(one.device->peak_allocated_bytes, one.device->allocated_bytes);
  EXPECT_GT(one.device->step_seconds, 0.0);
  EXPECT_DOUBLE_EQ(one.device->busy_seconds_total, one.device->step_seconds);

  TrainSteps(**gpu, 2);
  ASSERT_TRUE((*gpu)->GatherFullParams(&sync).ok());
  const EngineFigures three = (*gpu)->figures();
  EXPECT_GT(three.device->busy_seconds_total,
            one.device->busy_seconds_total + three.device->step_seconds * 0.5);
  EXPECT_EQ(three.device->arena_bytes, one.device->arena_bytes);  // same shape: no growth
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
