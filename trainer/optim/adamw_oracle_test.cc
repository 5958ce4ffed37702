// ctest-labels: unit;oracle
// AdamW (with the no-decay groups), the linear warmup/decay schedule and global-norm clipping
// against torch.optim.AdamW + transformers.get_linear_schedule_with_warmup +
// torch.nn.utils.clip_grad_norm_, over several steps. Skips without torch/transformers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "trainer/io/safetensors.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/lr_schedule.h"

namespace ringmaster::trainer {
namespace {
namespace fs = std::filesystem;

TEST(AdamWOracle, MatchesTorch) {
  const char* py = std::getenv("RINGMASTER_PYTHON");
  if (py == nullptr || std::system((std::string(py) + " -c 'import torch, transformers' "
                                                      ">/dev/null 2>&1")
                                       .c_str()) != 0) {
    GTEST_SKIP() << "python with torch + transformers not available";
  }
  BertConfig c;
  c.vocab_size = 11;
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 12;
  c.max_position_embeddings = 6;
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> params(layout.total);
  InitBertParams(c, layout, 1, params.data());
  const std::vector<float> initial = params;
  const int kSteps = 6;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> grads(kSteps, std::vector<float>(layout.total));
  for (auto& g : grads) {
    for (float& x : g) x = nd(rng) * 0.3f;
  }
  AdamW opt(layout, {0.9, 0.98, 1e-6, 0.05});
  LrSchedule sched{jobspec::LrScheduleKind::kLinear, 1e-2, 2, kSteps};
  std::vector<float> norms;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> g = grads[s];
    norms.push_back(static_cast<float>(ClipGradNorm(g.data(), g.size(), 1.0)));
    opt.Step(params.data(), g.data(), sched.LrAt(s));
  }
  const fs::path dir = fs::temp_directory_path() / ("rm_adamw_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<TensorToWrite> t;
  std::vector<float> decay(layout.total);
  for (const ParamSpec& s : layout.specs) {
    std::fill_n(decay.begin() + s.offset, s.numel, s.weight_decay ? 1.0f : 0.0f);
  }
  const int64_t n = static_cast<int64_t>(layout.total);
  t.push_back({"initial", DType::kF32, {n}, initial.data(), initial.size() * 4});
  t.push_back({"final", DType::kF32, {n}, params.data(), params.size() * 4});
  t.push_back({"exp_avg", DType::kF32, {n}, opt.exp_avg().data(), params.size() * 4});
  t.push_back({"exp_avg_sq", DType::kF32, {n}, opt.exp_avg_sq().data(), params.size() * 4});
  t.push_back({"decay", DType::kF32, {n}, decay.data(), decay.size() * 4});
  t.push_back({"norms", DType::kF32, {kSteps}, norms.data(), norms.size() * 4});
  std::vector<std::string> names;
  for (int s = 0; s < kSteps; ++s) names.push_back("grad." + std::to_string(s));
  for (int s = 0; s < kSteps; ++s) {
    t.push_back({names[s], DType::kF32, {n}, grads[s].data(), grads[s].size() * 4});
  }
  ASSERT_TRUE(WriteSafetensors((dir / "adamw.safetensors").string(), t).ok());
  const std::string cmd = std::string(py) + " " + std::getenv("RINGMASTER_SOURCE_DIR") +
                          "/tests/oracle/torch_adamw_check.py " +
                          (dir / "adamw.safetensors").string() + " " + std::to_string(kSteps);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "torch disagrees (see output above)";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster::trainer
