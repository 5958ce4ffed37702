// Gradient checks: every parameter's analytic gradient against central finite differences in
// fp64, with padding, dropout (counter-based masks are the same on every forward for a seed),
// cross-entropy and MSE heads; plus fp32 against fp64 on the same inputs.
#include "trainer/model/bert_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace ringmaster::trainer {
namespace {

BertConfig TinyConfig(int num_labels, float dropout) {
  BertConfig c;
  c.vocab_size = 13;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 12;
  c.max_position_embeddings = 8;
  c.type_vocab_size = 2;
  c.num_labels = num_labels;
  c.hidden_dropout_prob = dropout;
  c.attention_probs_dropout_prob = dropout;
  c.layer_norm_eps = 1e-5f;
  c.initializer_range = 0.5f;  // large weights make every path's gradient visible
  return c;
}

struct Case {
  int B = 2, S = 5;
  std::vector<int32_t> ids{2, 5, 7, 1, 3, 2, 9, 4, 0, 0};
  std::vector<int32_t> types{0, 0, 1, 1, 0, 0, 0, 1, 0, 0};
  std::vector<float> mask{1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  std::vector<float> labels;
  BertInputs Inputs() const { return {B, S, ids.data(), types.data(), mask.data(), labels.data()}; }
};

void CheckGradients(int num_labels, float dropout) {
  const BertConfig c = TinyConfig(num_labels, dropout);
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> init(layout.total);
  InitBertParams(c, layout, 7, init.data());
  std::vector<double> params(init.begin(), init.end());
  // Non-trivial LayerNorm and bias values.
  std::mt19937 rng(3);
  std::normal_distribution<double> nd(0.0, 0.3);
  for (const ParamSpec& s : layout.specs) {
    if (s.init != ParamInit::kNormal) {
      for (size_t i = 0; i < s.numel; ++i) params[s.offset + i] += nd(rng);
    }
  }
  Case cs;
  cs.labels = num_labels == 1 ? std::vector<float>{0.7f, -1.2f} : std::vector<float>{2, 0};
  BertModel<double> model(c, layout);
  const uint64_t seed = 1234;
  std::vector<double> grads(layout.total, 0.0);
  model.Forward(params.data(), cs.Inputs(), /*training=*/true, seed);
  const double weight = 0.75;  // loss_weight is honoured
  model.Backward(params.data(), grads.data(), weight);

  const double h = 1e-6;
  int checked = 0;
  for (const ParamSpec& s : layout.specs) {
    for (size_t i = 0; i < s.numel; ++i) {
      const size_t k = s.offset + i;
      const double saved = params[k];
      params[k] = saved + h;
      const double up = model.Forward(params.data(), cs.Inputs(), true, seed);
      params[k] = saved - h;
      const double down = model.Forward(params.data(), cs.Inputs(), true, seed);
      params[k] = saved;
      double numeric = weight * (up - down) / (2 * h);
      if (s.name == "bert.embeddings.word_embeddings.weight" &&
          static_cast<int>(i) / c.hidden_size == c.pad_token_id) {
        numeric = 0.0;  // nn.Embedding(padding_idx=...) leaves the padding row's gradient 0
      }
      const double tol = 1e-6 + 1e-5 * std::abs(numeric);
      ASSERT_NEAR(grads[k], numeric, tol) << s.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(layout.total));
}

TEST(BertModelGrad, CrossEntropyNoDropout) { CheckGradients(3, 0.0f); }
TEST(BertModelGrad, CrossEntropyWithDropout) { CheckGradients(3, 0.2f); }
TEST(BertModelGrad, RegressionMse) { CheckGradients(1, 0.1f); }

TEST(BertModel, Fp32MatchesFp64) {
  const BertConfig c = TinyConfig(2, 0.0f);
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> pf(layout.total);
  InitBertParams(c, layout, 11, pf.data());
  std::vector<double> pd(pf.begin(), pf.end());
  Case cs;
  cs.labels = {1, 0};
  BertModel<float> mf(c, layout);
  BertModel<double> md(c, layout);
  const float lf = mf.Forward(pf.data(), cs.Inputs(), true, 1);
  const double ld = md.Forward(pd.data(), cs.Inputs(), true, 1);
  EXPECT_NEAR(lf, ld, 1e-5 * std::abs(ld) + 1e-6);
  std::vector<float> gf(layout.total, 0.0f);
  std::vector<double> gd(layout.total, 0.0);
  mf.Backward(pf.data(), gf.data(), 1.0f);
  md.Backward(pd.data(), gd.data(), 1.0);
  for (size_t i = 0; i < layout.total; ++i) {
    ASSERT_NEAR(gf[i], gd[i], 1e-4 * std::abs(gd[i]) + 1e-5) << i;
  }
}

TEST(BertModel, PaddingDoesNotChangeLogits) {
  // Extra padding columns must not move the logits of the real tokens.
  const BertConfig c = TinyConfig(2, 0.0f);
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<double> p(layout.total);
  std::vector<float> pf(layout.total);
  InitBertParams(c, layout, 5, pf.data());
  std::copy(pf.begin(), pf.end(), p.begin());
  BertModel<double> m(c, layout);
  std::vector<int32_t> ids3{2, 5, 3};
  std::vector<int32_t> ids6{2, 5, 3, 0, 0, 0};
  std::vector<float> m6{1, 1, 1, 0, 0, 0};
  m.Forward(p.data(), {1, 3, ids3.data(), nullptr, nullptr, nullptr}, false, 0);
  const std::vector<double> a = m.logits();
  m.Forward(p.data(), {1, 6, ids6.data(), nullptr, m6.data(), nullptr}, false, 0);
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(a[i], m.logits()[i], 1e-12);
}

TEST(BertModel, DropoutIsSeededAndReproducible) {
  const BertConfig c = TinyConfig(2, 0.3f);
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> p(layout.total);
  InitBertParams(c, layout, 5, p.data());
  Case cs;
  cs.labels = {1, 0};
  BertModel<float> m(c, layout);
  const float a = m.Forward(p.data(), cs.Inputs(), true, 99);
  const float b = m.Forward(p.data(), cs.Inputs(), true, 99);
  const float d = m.Forward(p.data(), cs.Inputs(), true, 100);
  const float e = m.Forward(p.data(), cs.Inputs(), false, 99);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
  EXPECT_NE(a, e);
}

}  // namespace
}  // namespace ringmaster::trainer
