// ctest-labels: gpu
// Gradient checkpointing in the CUDA BERT (CudaBertModel's `gradient_checkpointing`): backward
// reruns each encoder layer's forward from its saved input with the same dropout masks, so the
// loss, logits and every gradient are the same bits as without it, and a training state's steps
// give the same losses, norms and weights; the activation arena is smaller, and with it each
// added layer costs only its input (N·H floats) instead of all its intermediates. Prints the
// arena of a BERT-base shape both ways. Skips cleanly (exit 77) where no CUDA device exists.
// The same bits on a real GPU too (gpu_test_tolerance.h): both runs are on one device and issue
// the same GEMMs, whose plans match (gemm.h: shape, types and operand alignment; the arena keeps
// every buffer 256-byte aligned), and cuBLASLt gives the same bits for the same algorithm and
// inputs; the project's kernels have fixed reduction orders and no atomics on these paths.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/model/bert_cuda_model.h"
#include "trainer/cuda/testing/gpu_model_test_fixture.h"
#include "trainer/cuda/testing/gpu_test_batch.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {
namespace {

// The small test BERT with three layers, so that a shared intermediate set is reused twice.
BertConfig ThreeLayers() {
  BertConfig c = SmallTestConfig();
  c.num_hidden_layers = 3;
  return c;
}

std::vector<float> Params(const BertConfig& c, const ParamLayout& layout) {
  std::vector<float> p(layout.total);
  InitBertParams(c, layout, 5, p.data());
  return p;
}

// MakeTestMicroBatch with distinct token ids (padding stays id 0, which gets no gradient). The
// word-embedding gradient adds with atomicAdd (kernels.h): repeated ids would let its last bits
// vary from run to run on a GPU, checkpointing or not; with one add per element the two runs
// are comparable bit for bit on a GPU as under the emulator.
TestMicroBatch DistinctIds(const BertConfig& c, uint32_t seed, int B, int S = 8) {
  TestMicroBatch m = MakeTestMicroBatch(c, seed, B, S);
  std::vector<int32_t> ids(c.vocab_size - 1);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i) + 1;
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  size_t next = 0;
  for (size_t i = 0; i < m.ids.size(); ++i) {
    if (m.mask[i] > 0) m.ids[i] = ids.at(next++);
  }
  return m;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The first tensor whose gradients differ in any bit, or "" when none does.
std::string FirstDifferingTensor(const ParamLayout& layout, const std::vector<float>& a,
                                 const std::vector<float>& b) {
  for (const ParamSpec& s : layout.specs) {
    if (std::memcmp(a.data() + s.offset, b.data() + s.offset, s.numel * sizeof(float)) != 0) {
      return s.name;
    }
  }
  return "";
}

class GradientCheckpointingGpu : public GpuModelTest<> {
 protected:
  struct Outcome {
    std::vector<float> losses, logits, grads;
    size_t arena = 0, arena_predicted = 0;
  };
  // Two accumulated training micro-batches (different shapes and seeds), then an evaluation.
  Outcome TwoMicroBatches(const BertConfig& c, bool checkpointing,
                          GemmPrecision precision = GemmPrecision::kFp32) {
    Outcome r;
    const ParamLayout layout = MakeBertParamLayout(c);
    auto model = CudaBertModel::Create(c, layout, gemm_.get(), stream_, precision, checkpointing);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return r;
    EXPECT_EQ((*model)->gradient_checkpointing(), checkpointing);
    DeviceArray<float> params(Params(c, layout)), grads(std::vector<float>(layout.total, 0.0f));
    const TestMicroBatch first = DistinctIds(c, 1, 3, 9);
    const TestMicroBatch second = DistinctIds(c, 2, 2, 6);
    r.arena_predicted = (*model)->ArenaBytesFor(3, 9, /*training=*/true);
    for (const auto& [mb, seed, weight] :
         {std::tuple{&first, 1234u, 0.6f}, std::tuple{&second, 1235u, 0.4f}}) {
      absl::StatusOr<float> loss = (*model)->Forward(params.p, mb->Inputs(), true, seed);
      EXPECT_TRUE(loss.ok()) << loss.status();
      r.losses.push_back(loss.value_or(-1));
      absl::StatusOr<std::vector<float>> logits = (*model)->Logits();
      EXPECT_TRUE(logits.ok());
      r.logits.insert(r.logits.end(), logits->begin(), logits->end());
      EXPECT_TRUE((*model)->Backward(params.p, grads.p, weight).ok());
    }
    absl::StatusOr<float> eval = (*model)->Forward(params.p, first.Inputs(), false, 0);
    EXPECT_TRUE(eval.ok());
    r.losses.push_back(eval.value_or(-1));
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    r.grads = grads.Download();
    r.arena = (*model)->arena_bytes();
    return r;
  }
};

TEST_F(GradientCheckpointingGpu, ModelSameBitsSmallerArena) {
  for (float dropout : {0.1f, 0.0f}) {
    SCOPED_TRACE(dropout);
    BertConfig c = ThreeLayers();
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = dropout;
    const Outcome plain = TwoMicroBatches(c, false);
    const Outcome ckpt = TwoMicroBatches(c, true);
    EXPECT_TRUE(SameBits(plain.losses, ckpt.losses));
    EXPECT_TRUE(SameBits(plain.logits, ckpt.logits));
    EXPECT_EQ(FirstDifferingTensor(MakeBertParamLayout(c), plain.grads, ckpt.grads), "");
    // The arena is the one ArenaBytesFor predicts for the largest shape, and smaller.
    EXPECT_EQ(plain.arena, plain.arena_predicted);
    EXPECT_EQ(ckpt.arena, ckpt.arena_predicted);
    EXPECT_LT(ckpt.arena, plain.arena);
    std::printf("small 3-layer BERT, B=3 S=9, dropout %.1f: arena %zu bytes, %zu checkpointed\n",
                dropout, plain.arena, ckpt.arena);
  }
}

// bf16 GEMMs (autocast's weight copies and activation cast slots are used by the recompute too).
TEST_F(GradientCheckpointingGpu, Bf16SameBits) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  if (prop.major < 8) GTEST_SKIP() << "bf16 GEMMs need sm_80";
  const BertConfig c = ThreeLayers();
  const Outcome plain = TwoMicroBatches(c, false, GemmPrecision::kBf16);
  const Outcome ckpt = TwoMicroBatches(c, true, GemmPrecision::kBf16);
  EXPECT_TRUE(SameBits(plain.losses, ckpt.losses));
  EXPECT_TRUE(SameBits(plain.logits, ckpt.logits));
  EXPECT_EQ(FirstDifferingTensor(MakeBertParamLayout(c), plain.grads, ckpt.grads), "");
  EXPECT_LT(ckpt.arena, plain.arena);
}

// BERT-base (12 layers, H 768, 12 heads, I 3072, dropout 0.1) at B=32, S=128: the arena both
// ways. Checkpointed, a layer more costs exactly its input (N·H floats); without, all of its
// intermediates.
TEST_F(GradientCheckpointingGpu, BertBaseArena) {
  BertConfig c;
  c.vocab_size = 30522;
  c.hidden_size = 768;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 12;
  c.intermediate_size = 3072;
  c.max_position_embeddings = 512;
  const int B = 32, S = 128;
  auto bytes = [&](int layers, bool checkpointing) -> size_t {
    BertConfig l = c;
    l.num_hidden_layers = layers;
    auto m = CudaBertModel::Create(l, MakeBertParamLayout(l), gemm_.get(), stream_,
                                   GemmPrecision::kFp32, checkpointing);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? (*m)->ArenaBytesFor(B, S, /*training=*/true) : 0;
  };
  const size_t plain = bytes(12, false), ckpt = bytes(12, true);
  const size_t input_bytes = static_cast<size_t>(B) * S * c.hidden_size * sizeof(float);
  const size_t layer_plain = plain - bytes(11, false), layer_ckpt = ckpt - bytes(11, true);
  EXPECT_EQ(layer_ckpt, input_bytes);
  EXPECT_GT(layer_plain, 4 * input_bytes);
  EXPECT_LT(ckpt, plain / 3);
  std::printf(
      "BERT-base, B=%d S=%d, fp32, dropout 0.1: arena %zu bytes (%.1f MiB) without "
      "checkpointing, %zu bytes (%.1f MiB) with; a 12th layer adds %zu bytes without, %zu with\n",
      B, S, plain, plain / 1048576.0, ckpt, ckpt / 1048576.0, layer_plain, layer_ckpt);
}

// A training state's steps (two micro-batches each, AdamW, clipping) with and without
// checkpointing: the same losses, gradient norms and weights, bit for bit; the reported arena
// smaller.
TEST_F(GradientCheckpointingGpu, TrainerStateSameSteps) {
  const BertConfig c = ThreeLayers();
  const ParamLayout layout = MakeBertParamLayout(c);
  const std::vector<float> init = Params(c, layout);
  std::vector<float> losses[2], norms[2], weights[2];
  uint64_t arena[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    CudaTrainerOptions options;
    options.gradient_checkpointing = on == 1;
    auto state = CudaTrainerState::Create(c, layout, init, options);
    ASSERT_TRUE(state.ok()) << state.status();
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*state)->BeginStep().ok());
      for (int m = 0; m < 2; ++m) {
        const TestMicroBatch mb = DistinctIds(c, 10 * step + m, 2);
        absl::StatusOr<float> loss =
            (*state)->ForwardBackward(mb.Inputs(), m == 0 ? 0.25f : 0.75f, 100 * step + m);
        ASSERT_TRUE(loss.ok()) << loss.status();
        losses[on].push_back(*loss);
      }
      absl::StatusOr<StepOutcome> out = (*state)->FinishStep(2e-5, 0.1);
      ASSERT_TRUE(out.ok()) << out.status();
      norms[on].push_back(static_cast<float>(out->grad_norm));
    }
    absl::StatusOr<std::vector<float>> w = (*state)->DownloadParams();
    ASSERT_TRUE(w.ok());
    weights[on] = *w;
    arena[on] = (*state)->figures().arena_bytes;
  }
  EXPECT_TRUE(SameBits(losses[0], losses[1]));
  EXPECT_TRUE(SameBits(norms[0], norms[1]));
  EXPECT_EQ(FirstDifferingTensor(layout, weights[0], weights[1]), "");
  EXPECT_FALSE(SameBits(weights[0], init));  // the steps did move the weights
  EXPECT_GT(arena[1], 0u);
  EXPECT_LT(arena[1], arena[0]);
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
