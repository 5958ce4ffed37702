// Forward and backward against Hugging Face transformers (PyTorch) as an independent reference:
// a random tiny model is exported as a HF directory, both sides run the same padded batch, and
// logits, loss and every parameter gradient are compared. Skips when RINGMASTER_PYTHON lacks
// torch/transformers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "trainer/io/hf_model_dir.h"
#include "trainer/io/safetensors.h"
#include "trainer/model/bert_model.h"

namespace ringmaster::trainer {
namespace {
namespace fs = std::filesystem;

bool HavePythonOracle() {
  const char* py = std::getenv("RINGMASTER_PYTHON");
  if (py == nullptr || *py == '\0') return false;
  std::string cmd = std::string(py) + " -c 'import torch, transformers' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

void RunCase(int num_labels) {
  if (!HavePythonOracle()) GTEST_SKIP() << "python with torch + transformers not available";
  const fs::path dir = fs::temp_directory_path() / ("rm_oracle_" + std::to_string(::getpid()) +
                                                    "_" + std::to_string(num_labels));
  fs::remove_all(dir);
  fs::create_directories(dir);
  BertConfig c;
  c.vocab_size = 40;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 48;
  c.max_position_embeddings = 16;
  c.num_labels = num_labels;
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  c.initializer_range = 0.2f;
  c.layer_norm_eps = 1e-12f;
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> params(layout.total);
  InitBertParams(c, layout, 3, params.data());
  // Non-trivial LayerNorm parameters and biases.
  for (const ParamSpec& s : layout.specs) {
    if (s.init != ParamInit::kNormal) {
      for (size_t i = 0; i < s.numel; ++i)
        params[s.offset + i] += 0.05f * std::sin(1.0f + i + s.offset);
    }
  }
  // vocab.txt for the export (the tokenizer is not used here).
  {
    std::string v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < c.vocab_size; ++i) v += "tok" + std::to_string(i) + "\n";
    FILE* f = std::fopen((dir / "vocab_src.txt").c_str(), "w");
    std::fputs(v.c_str(), f);
    std::fclose(f);
  }
  ASSERT_TRUE(ExportHfModelDir((dir / "model").string(), c, layout, params.data(),
                               (dir / "vocab_src.txt").string(), true)
                  .ok());
  const int B = 3, S = 7;
  std::vector<int32_t> ids = {2, 7, 9, 11, 3, 0, 0, 2, 5, 6, 3, 0, 0, 0, 2, 8, 12, 13, 14, 15, 3};
  std::vector<int32_t> types = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
  std::vector<float> mask = {1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
  std::vector<float> labels =
      num_labels == 1 ? std::vector<float>{0.5f, -1.0f, 2.0f} : std::vector<float>{1, 0, 2};
  BertModel<float> model(c, layout);
  const float loss = model.Forward(
      params.data(), {B, S, ids.data(), types.data(), mask.data(), labels.data()}, true, 0);
  std::vector<float> grads(layout.total, 0.0f);
  model.Backward(params.data(), grads.data(), 1.0f);

  std::vector<TensorToWrite> t;
  std::vector<float> loss_v = {loss};
  std::vector<int64_t> ids64(ids.begin(), ids.end()), types64(types.begin(), types.end());
  t.push_back({"input_ids", DType::kI64, {B, S}, ids64.data(), ids64.size() * 8});
  t.push_back({"token_type_ids", DType::kI64, {B, S}, types64.data(), types64.size() * 8});
  t.push_back({"attention_mask", DType::kF32, {B, S}, mask.data(), mask.size() * 4});
  t.push_back({"labels", DType::kF32, {B}, labels.data(), labels.size() * 4});
  t.push_back(
      {"logits", DType::kF32, {B, num_labels}, model.logits().data(), model.logits().size() * 4});
  t.push_back({"loss", DType::kF32, {1}, loss_v.data(), 4});
  for (const ParamSpec& s : layout.specs) {
    t.push_back({"grad." + s.name, DType::kF32, s.shape, grads.data() + s.offset, s.numel * 4});
  }
  ASSERT_TRUE(WriteSafetensors((dir / "ours.safetensors").string(), t).ok());
  const std::string cmd =
      std::string(std::getenv("RINGMASTER_PYTHON")) + " " + std::getenv("RINGMASTER_SOURCE_DIR") +
      "/tests/oracle/hf_forward_backward.py --model " + (dir / "model").string() + " --ours " +
      (dir / "ours.safetensors").string();
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "python oracle reported a mismatch (see output above)";
  fs::remove_all(dir);
}

TEST(BertHfOracle, ClassificationForwardBackward) { RunCase(3); }
TEST(BertHfOracle, RegressionForwardBackward) { RunCase(1); }

}  // namespace
}  // namespace ringmaster::trainer
