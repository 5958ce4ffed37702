// ctest-labels: gpu
// The CUDA BERT (bert_cuda_model.h) against the CPU model, its oracle: loss, logits and every
// parameter gradient on a small BERT with padding, token types and dropout (same masks for the
// same seed), plus the attention layout and dropout kernels against direct loops. Skips cleanly
// (exit 77) where no CUDA device exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/model/bert_cuda_model.h"
#include "trainer/cuda/testing/gpu_model_test_fixture.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/model/cpu_ops.h"

#ifdef CUDA_EMU
#include "cuda_emu/cublaslt_emu_control.h"
#endif

namespace ringmaster::trainer::cuda {
namespace {

BertConfig SmallConfig(float dropout) {
  BertConfig c;
  c.vocab_size = 61;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 48;
  c.max_position_embeddings = 16;
  c.num_labels = 3;
  c.hidden_dropout_prob = dropout;
  c.attention_probs_dropout_prob = dropout;
  return c;
}

struct Batch {
  int B = 3, S = 9;
  std::vector<int32_t> ids, types;
  std::vector<float> mask, labels;
  BertInputs Inputs() const {
    BertInputs in;
    in.batch = B;
    in.seq = S;
    in.input_ids = ids.data();
    in.token_type_ids = types.data();
    in.attention_mask = mask.data();
    in.labels = labels.data();
    return in;
  }
};

// Sequences of lengths S, S-2, S-5 (padded with id 0), two segments, labels 0..2.
Batch MakeBatch(const BertConfig& c) {
  Batch b;
  std::mt19937 rng(7);
  for (int i = 0; i < b.B; ++i) {
    const int len = b.S - (i == 0 ? 0 : i == 1 ? 2 : 5);
    for (int s = 0; s < b.S; ++s) {
      const bool real = s < len;
      b.ids.push_back(real ? 1 + static_cast<int32_t>(rng() % (c.vocab_size - 1)) : 0);
      b.types.push_back(real && s >= len / 2 ? 1 : 0);
      b.mask.push_back(real ? 1.0f : 0.0f);
    }
    b.labels.push_back(static_cast<float>(i % c.num_labels));
  }
  return b;
}

// HF init plus noise on every parameter, so biases and LayerNorm terms are not trivial.
std::vector<float> MakeParams(const BertConfig& c, const ParamLayout& layout) {
  std::vector<float> p(layout.total);
  InitBertParams(c, layout, 3, p.data());
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (float& x : p) x += noise(rng);
  return p;
}

// Max |a - b| relative to max |a| (the gradient's scale), per named tensor. Attention key biases
// have a true gradient of exactly zero (softmax ignores a per-row shift), so both engines give
// rounding noise there: the emulator the CPU's noise (its GEMMs sum in the CPU's order), a real
// GPU noise of its own, about u·√K of the same layer's query-bias gradient scale; on a GPU they
// are measured against that scale.
void ExpectTensorsClose(const ParamLayout& layout, const std::vector<float>& ref,
                        const std::vector<float>& got, double rtol) {
  auto scale_of = [&](const ParamSpec& s) {
    double m = 0;
    for (size_t i = 0; i < s.numel; ++i) {
      m = std::max(m, std::abs(static_cast<double>(ref[s.offset + i])));
    }
    return m;
  };
  for (const ParamSpec& s : layout.specs) {
    double max_ref = scale_of(s), max_diff = 0;
    const size_t key = s.name.find("attention.self.key.bias");
    if (!kEmulatedGpu && key != std::string::npos) {
      const ParamSpec* query = layout.Find(s.name.substr(0, key) + "attention.self.query.bias");
      if (query != nullptr) max_ref = std::max(max_ref, scale_of(*query));
    }
    for (size_t i = 0; i < s.numel; ++i) {
      max_diff =
          std::max(max_diff, std::abs(static_cast<double>(ref[s.offset + i]) - got[s.offset + i]));
    }
    EXPECT_LE(max_diff, rtol * std::max(max_ref, 1e-6))
        << s.name << " (max |ref| " << max_ref << ")";
  }
}

// Tolerances: the emulator's were fitted to its exact GEMMs; a real GPU's are derived in
// gpu_test_tolerance.h (cuBLAS's summation order over the model's GEMMs).
const double kLogitTol = GpuTolerance(1e-5, kGpuLogitTolerance);
const double kGradTol = GpuTolerance(2e-4, kGpuGradScaleTolerance);

using CudaBertTest = GpuModelTest<::testing::TestWithParam<float>>;

TEST_P(CudaBertTest, ForwardBackwardMatchCpuModel) {
  const BertConfig config = SmallConfig(GetParam());
  const ParamLayout layout = MakeBertParamLayout(config);
  const std::vector<float> params = MakeParams(config, layout);
  const Batch batch = MakeBatch(config);
  const uint64_t seed = 1234;
  const float loss_weight = 0.75f;

  BertModel<float> cpu(config, layout);
  const float cpu_loss = cpu.Forward(params.data(), batch.Inputs(), /*training=*/true, seed);
  std::vector<float> cpu_grads(layout.total, 0.0f);
  cpu.Backward(params.data(), cpu_grads.data(), loss_weight);

  auto model = CudaBertModel::Create(config, layout, gemm_.get(), stream_);
  ASSERT_TRUE(model.ok()) << model.status();
  DeviceArray<float> d_params(params), d_grads(std::vector<float>(layout.total, 0.0f));
  absl::StatusOr<float> loss = (*model)->Forward(d_params.p, batch.Inputs(), true, seed);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, cpu_loss, kLogitTol * std::max(1.0f, std::abs(cpu_loss)));
  absl::StatusOr<std::vector<float>> logits = (*model)->Logits();
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->size(), cpu.logits().size());
  for (size_t i = 0; i < logits->size(); ++i) {
    EXPECT_NEAR((*logits)[i], cpu.logits()[i], kLogitTol) << "logit " << i;
  }
  ASSERT_TRUE((*model)->Backward(d_params.p, d_grads.p, loss_weight).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ExpectTensorsClose(layout, cpu_grads, d_grads.Download(), kGradTol);

  // Evaluation mode: no dropout, no labels needed; logits still match.
  BertInputs eval = batch.Inputs();
  eval.labels = nullptr;
  cpu.Forward(params.data(), eval, /*training=*/false, seed);
  ASSERT_TRUE((*model)->Forward(d_params.p, eval, false, seed).ok());
  logits = (*model)->Logits();
  ASSERT_TRUE(logits.ok());
  for (size_t i = 0; i < logits->size(); ++i) {
    EXPECT_NEAR((*logits)[i], cpu.logits()[i], kLogitTol) << "eval logit " << i;
  }
  // Backward after an evaluation forward is refused, not run on stale activations.
  EXPECT_FALSE((*model)->Backward(d_params.p, d_grads.p, 1.0f).ok());
#ifdef CUDA_EMU
  // Run with CUDA_EMU_CUBLASLT_REFUSE=all (ctest bert_cuda_gpu_test_plain_gemm): every GEMM
  // above went through the plain fp32 kernel, none through cuBLASLt.
  if (cuda_emu::blas::GetLtRefusals().refuse_algos == (1u << cuda_emu::blas::kLtCandidates) - 1) {
    EXPECT_GT(gemm_->stats().plain_runs, 0);
    for (int64_t runs : cuda_emu::blas::GetLtCounters().runs) EXPECT_EQ(runs, 0);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Dropout, CudaBertTest, ::testing::Values(0.0f, 0.1f));

// The fused attention holds head dims up to 128: a larger one is refused when the model is
// made, naming it, rather than failing at the first launch.
using CudaBertCreateTest = GpuModelTest<>;
TEST_F(CudaBertCreateTest, HeadDimBeyondTheFusedAttentionIsRefused) {
  BertConfig c = SmallConfig(0.0f);
  c.num_attention_heads = 2;
  c.hidden_size = 2 * 129;
  auto refused = CudaBertModel::Create(c, MakeBertParamLayout(c), gemm_.get(), stream_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("head dim 129"), std::string::npos) << refused.status();
  c.hidden_size = 2 * 128;
  EXPECT_TRUE(CudaBertModel::Create(c, MakeBertParamLayout(c), gemm_.get(), stream_).ok());
}

TEST(AttentionOps, HeadsLayoutRoundTrip) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int B = 2, S = 5, NH = 3, D = 4, H = NH * D;
  std::vector<float> qkv(static_cast<size_t>(B) * S * 3 * H);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i);
  DeviceArray<float> d_qkv(qkv), heads(static_cast<size_t>(B) * S * H),
      back(std::vector<float>(qkv.size(), -1.0f));
  ASSERT_EQ(RowsToHeads(d_qkv.p + H, 3 * H, heads.p, B, S, NH, D, nullptr), cudaSuccess);  // K
  const std::vector<float> k = heads.Download();
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int s = 0; s < S; ++s) {
        for (int d = 0; d < D; ++d) {
          const size_t at = ((static_cast<size_t>(b) * NH + h) * S + s) * D + d;
          ASSERT_EQ(k[at], qkv[(b * S + s) * 3 * H + H + h * D + d]) << b << h << s << d;
        }
      }
    }
  }
  ASSERT_EQ(HeadsToRows(heads.p, back.p + H, 3 * H, B, S, NH, D, nullptr), cudaSuccess);
  const std::vector<float> r = back.Download();
  for (size_t row = 0; row < static_cast<size_t>(B) * S; ++row) {
    for (int j = 0; j < 3 * H; ++j) {
      const float want = j >= H && j < 2 * H ? qkv[row * 3 * H + j] : -1.0f;  // only K written
      ASSERT_EQ(r[row * 3 * H + j], want) << row << " " << j;
    }
  }
  EXPECT_EQ(RowsToHeads(d_qkv.p, /*ld=*/H - 1, heads.p, B, S, NH, D, nullptr),
            cudaErrorInvalidValue);
}

TEST(AttentionOps, DropoutMasksAreTheCpuModels) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int BH = 5, S = 7;
  const float p = 0.3f;
  const uint64_t seed = 99;
  std::vector<float> probs(static_cast<size_t>(BH) * S * S);
  std::mt19937 rng(1);
  for (float& x : probs) x = std::uniform_real_distribution<float>(0, 1)(rng);
  DeviceArray<float> d_probs(probs), mask(probs.size()), dropped(probs.size());
  ASSERT_EQ(AttentionDropoutForward(d_probs.p, mask.p, dropped.p, BH, S, p, seed, nullptr),
            cudaSuccess);
  const std::vector<float> m = mask.Download(), d = dropped.Download();
  const float keep = 1.0f / (1.0f - p);
  int kept = 0;
  for (int bh = 0; bh < BH; ++bh) {
    const uint64_t s = cpu::Mix64(seed ^ static_cast<uint64_t>(bh));
    for (int i = 0; i < S * S; ++i) {
      const size_t at = static_cast<size_t>(bh) * S * S + i;
      const float want = cpu::UniformAt(s, i) >= p ? keep : 0.0f;
      ASSERT_EQ(m[at], want) << at;
      ASSERT_EQ(d[at], probs[at] * want) << at;
      kept += want != 0.0f;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, BH * S * S);
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
