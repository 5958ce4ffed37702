// The per-ISA tables of the elementwise loops (cpu_kernels.h): the baseline against fp64
// references, and every level this CPU can run, forced with SetIsa, against the baseline, loop
// by loop and through a whole training step of a small BERT. A level the CPU lacks is refused
// by name and its table must still be compiled (a distinct table on x86-64).
#include "trainer/model/cpu_kernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "trainer/model/bert_model.h"
#include "trainer/model/cpu_isa.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/optim/adamw.h"

namespace ringmaster::trainer::cpu {
namespace {

std::vector<float> Random(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// |got − want| <= atol + rtol·|want| everywhere, naming the first element that is not.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, double atol,
                 double rtol, const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i]))
        << what << " at " << i << " of " << want.size();
  }
}

// Restores the level active before the test.
class IsaGuard {
 public:
  IsaGuard() : saved_(ActiveIsa()) {}
  ~IsaGuard() { EXPECT_TRUE(SetIsa(saved_).ok()); }

 private:
  Isa saved_;
};

std::vector<Isa> SupportedLevels() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

TEST(CpuKernels, BaselineGeluMatchesErfInDouble) {
  const Kernels& k = KernelsFor(Isa::kBaseline);
  // Both tails, zero and the steep middle; n not a multiple of any vector width.
  std::vector<float> x = Random(100003, 9.0f, 1), dy = Random(x.size(), 1.0f, 2);
  x[0] = 0.0f;
  x[1] = -20.0f;
  x[2] = 20.0f;
  std::vector<float> y(x.size()), dx(x.size()), want_y(x.size()), want_dx(x.size());
  k.gelu_fwd(x.data(), y.data(), x.size());
  k.gelu_bwd(dy.data(), x.data(), dx.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    want_y[i] = static_cast<float>(v * cdf);
    want_dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
  // Abramowitz–Stegun's 1.5e-7 on Φ times |x| <= 20, plus float rounding.
  ExpectClose(want_y, y, 3e-7 * 20, 2e-6, "gelu forward");
  ExpectClose(want_dx, dx, 1e-6, 2e-6, "gelu backward");
  // The negative tail keeps its sign and size (no cancellation): GELU(−6) ≈ −5.9e-9.
  std::vector<float> tail = {-6.0f}, out(1);
  k.gelu_fwd(tail.data(), out.data(), 1);
  EXPECT_LT(out[0], 0.0f);
  EXPECT_NEAR(out[0], -6.0 * 0.5 * std::erfc(6.0 / std::sqrt(2.0)), 1e-9);
}

TEST(CpuKernels, BaselineSoftmaxAndLayerNormMatchDouble) {
  const Kernels& k = KernelsFor(Isa::kBaseline);
  const int S = 77;
  std::vector<float> scores = Random(static_cast<size_t>(S) * S, 8.0f, 3);
  std::vector<float> bias(S, 0.0f);
  bias[5] = bias[40] = std::numeric_limits<float>::lowest();  // masked keys
  std::vector<float> want(scores.size());
  const float scale = 0.125f;
  for (int i = 0; i < S; ++i) {
    double mx = -INFINITY, sum = 0;
    std::vector<double> row(S);
    for (int j = 0; j < S; ++j) {
      row[j] = static_cast<double>(scores[i * S + j]) * scale + bias[j];
      mx = std::max(mx, row[j]);
    }
    for (int j = 0; j < S; ++j) sum += row[j] = std::exp(row[j] - mx);
    for (int j = 0; j < S; ++j) want[i * S + j] = static_cast<float>(row[j] / sum);
  }
  k.softmax_fwd(scores.data(), bias.data(), S, scale);
  ExpectClose(want, scores, 1e-7, 1e-5, "softmax");
  EXPECT_EQ(scores[5], 0.0f);
  EXPECT_EQ(scores[S + 40], 0.0f);

  const int N = 33, H = 203;
  std::vector<float> x = Random(static_cast<size_t>(N) * H, 3.0f, 4);
  std::vector<float> g = Random(H, 1.0f, 5), b = Random(H, 1.0f, 6);
  std::vector<float> y(x.size()), mean(N), rstd(N), want_y(x.size());
  for (int i = 0; i < N; ++i) {
    double m = 0, var = 0;
    for (int j = 0; j < H; ++j) m += x[i * H + j];
    m /= H;
    for (int j = 0; j < H; ++j) var += (x[i * H + j] - m) * (x[i * H + j] - m);
    const double r = 1.0 / std::sqrt(var / H + 1e-5);
    for (int j = 0; j < H; ++j)
      want_y[i * H + j] = static_cast<float>((x[i * H + j] - m) * r * g[j] + b[j]);
  }
  k.layer_norm_fwd(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), N, H, 1e-5f);
  ExpectClose(want_y, y, 1e-5, 1e-5, "layernorm");
}

// Every loop of `isa` against the baseline's on the same inputs.
void CompareLoops(Isa isa) {
  SCOPED_TRACE(IsaName(isa));
  const Kernels& base = KernelsFor(Isa::kBaseline);
  const Kernels& k = KernelsFor(isa);
  const size_t n = 50021;  // not a multiple of 16
  const std::vector<float> x = Random(n, 6.0f, 11), dy = Random(n, 1.0f, 12);
  auto both = [&](auto&& run, const char* what, double atol, double rtol) {
    std::vector<float> a, b;
    run(base, &a);
    run(k, &b);
    ExpectClose(a, b, atol, rtol, what);
  };
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        o->resize(n);
        t.gelu_fwd(x.data(), o->data(), n);
      },
      "gelu_fwd", 1e-7, 1e-6);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        o->resize(n);
        t.gelu_bwd(dy.data(), x.data(), o->data(), n);
      },
      // dy·(Φ(x) + x·φ(x)): terms up to 0.25 whose sum can be 100x smaller (near x = -2.3), so a
      // few ulps of a term (3e-8 each) are what the levels may differ by: the AVX2 and AVX-512
      // builds fuse multiply-adds that the SSE2 baseline cannot, and clang contracts where GCC
      // does not (1.05e-7 measured under clang with ASan, 2026-12-03). 3e-7 covers ten ulps.
      "gelu_bwd", 3e-7, 1e-6);
  // Dropout masks are integer hashes: identical on every level.
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        std::vector<float> v = x, mask(n);
        t.dropout_fwd(v.data(), mask.data(), n, 0.1f, 99);
        *o = mask;
        o->insert(o->end(), v.begin(), v.end());
      },
      "dropout_fwd", 0, 0);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        std::vector<float> mask(n), out(n);
        t.dropout_probs(x.data(), mask.data(), out.data(), n, 0.25f, 7);
        *o = mask;
        o->insert(o->end(), out.begin(), out.end());
      },
      "dropout_probs", 0, 0);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        *o = x;
        t.mul(o->data(), dy.data(), n);
        t.add(o->data(), dy.data(), n);
        t.scale(o->data(), n, 0.3f);
      },
      "mul/add/scale", 0, 1e-6);
  const int S = 128;
  const std::vector<float> scores = Random(static_cast<size_t>(S) * S, 8.0f, 13);
  std::vector<float> bias(S, 0.0f);
  bias[S - 1] = std::numeric_limits<float>::lowest();
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        *o = scores;
        t.softmax_fwd(o->data(), bias.data(), S, 0.125f);
        std::vector<float> d(dy.begin(), dy.begin() + S * S);
        t.softmax_bwd(o->data(), d.data(), S, 0.125f);
        o->insert(o->end(), d.begin(), d.end());
      },
      "softmax fwd+bwd", 1e-7, 1e-5);
  const int N = 97, H = 201, threads = 3;
  const std::vector<float> g = Random(H, 1.0f, 14), b = Random(H, 1.0f, 15);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        std::vector<float> y(static_cast<size_t>(N) * H), mean(N), rstd(N), dx(y.size());
        std::vector<float> partial(static_cast<size_t>(threads) * 2 * H, 0.0f);
        t.layer_norm_fwd(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), N, H,
                         1e-5f);
        t.layer_norm_bwd(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(),
                         partial.data(), threads, N, H);
        *o = y;
        o->insert(o->end(), dx.begin(), dx.end());
        o->insert(o->end(), partial.begin(), partial.end());
      },
      "layernorm fwd+bwd", 1e-5, 1e-4);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        o->assign(static_cast<size_t>(threads) * H, 0.0f);
        t.column_sums(x.data(), o->data(), threads, N, H);
      },
      "column sums", 1e-5, 1e-5);
  both(
      [&](const Kernels& t, std::vector<float>* o) {
        std::vector<float> p = x, m(n, 0.01f), v(n, 0.02f);
        t.adamw(p.data(), dy.data(), m.data(), v.data(), 3, n - 5, 0.999f, 0.9f, 0.999f, 1e-3f,
                0.03f, 1e-8f);
        *o = p;
        o->insert(o->end(), m.begin(), m.end());
        o->insert(o->end(), v.begin(), v.end());
      },
      "adamw", 1e-7, 1e-6);
  const double s0 = base.sum_squares(x.data(), n), s1 = k.sum_squares(x.data(), n);
  EXPECT_NEAR(s1, s0, 1e-12 * s0);
}

TEST(CpuKernels, EveryLevelThisCpuRunsMatchesTheBaseline) {
  const std::vector<Isa> levels = SupportedLevels();
  ASSERT_FALSE(levels.empty());
  for (Isa isa : levels) CompareLoops(isa);
  std::string ran;
  for (Isa isa : levels) ran += std::string(IsaName(isa)) + " ";
  RecordProperty("levels_compared", ran);
}

TEST(CpuKernels, EveryLevelIsCompiledAndAnUnsupportedOneIsRefused) {
#if defined(__x86_64__)
  // Three distinct tables: the AVX ones exist even where they cannot run.
  EXPECT_NE(&KernelsFor(Isa::kAvx2), &KernelsFor(Isa::kBaseline));
  EXPECT_NE(&KernelsFor(Isa::kAvx512), &KernelsFor(Isa::kAvx2));
  EXPECT_NE(KernelsFor(Isa::kAvx512).gelu_fwd, KernelsFor(Isa::kAvx2).gelu_fwd);
  EXPECT_NE(KernelsFor(Isa::kAvx2).gelu_fwd, KernelsFor(Isa::kBaseline).gelu_fwd);
#endif
  IsaGuard guard;
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    const absl::Status st = SetIsa(isa);
    if (IsaSupported(isa)) {
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_EQ(ActiveIsa(), isa);
      EXPECT_EQ(&ActiveKernels(), &KernelsFor(isa));
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(st.message().find(IsaName(isa)), std::string::npos) << st;
      EXPECT_NE(ActiveIsa(), isa);
    }
  }
}

TEST(CpuKernels, EnvironmentPicksTheLevelAndRejectsBadValues) {
  IsaGuard guard;
  ASSERT_EQ(setenv("RINGMASTER_CPU_ISA", "baseline", 1), 0);
  ASSERT_TRUE(SetIsaFromEnv().ok());
  EXPECT_EQ(ActiveIsa(), Isa::kBaseline);
  ASSERT_EQ(setenv("RINGMASTER_CPU_ISA", "auto", 1), 0);
  ASSERT_TRUE(SetIsaFromEnv().ok());
  EXPECT_EQ(ActiveIsa(), BestSupportedIsa());
  ASSERT_EQ(setenv("RINGMASTER_CPU_ISA", "sse9", 1), 0);
  const absl::Status bad = SetIsaFromEnv();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("RINGMASTER_CPU_ISA=sse9"), std::string::npos) << bad;
  EXPECT_EQ(ActiveIsa(), BestSupportedIsa());  // unchanged by the refused value
  ASSERT_EQ(unsetenv("RINGMASTER_CPU_ISA"), 0);
  EXPECT_TRUE(SetIsaFromEnv().ok());
}

// One training step of a small BERT (dropout on, padding) on each level against the baseline:
// loss, every gradient and the parameters after AdamW. Shows that the model and the optimizer
// reach the chosen table.
TEST(CpuKernels, TrainingStepOnEveryLevelMatchesTheBaseline) {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 3;
  c.intermediate_size = 96;
  c.max_position_embeddings = 32;
  c.num_labels = 3;
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> init(layout.total);
  InitBertParams(c, layout, 5, init.data());
  const int B = 3, S = 19;
  std::mt19937 rng(1);
  std::vector<int32_t> ids(B * S), types(B * S, 0);
  for (int32_t& t : ids) t = static_cast<int32_t>(rng() % 50);
  std::vector<float> mask(B * S, 1.0f), labels = {0, 2, 1};
  for (int s = 15; s < S; ++s) mask[S + s] = 0.0f;
  const BertInputs in{B, S, ids.data(), types.data(), mask.data(), labels.data()};
  auto run = [&](Isa isa, std::vector<float>* out) {
    EXPECT_TRUE(SetIsa(isa).ok());
    BertModel<float> model(c, layout);
    std::vector<float> params = init, grads(layout.total, 0.0f);
    const float loss = model.Forward(params.data(), in, /*training=*/true, 77);
    model.Backward(params.data(), grads.data(), 1.0f);
    *out = grads;
    ClipGradNorm(grads.data(), grads.size(), 0.5);
    AdamW opt(layout, {});
    opt.Step(params.data(), grads.data(), 1e-3);
    out->insert(out->end(), params.begin(), params.end());
    out->push_back(loss);
  };
  IsaGuard guard;
  std::vector<float> base;
  run(Isa::kBaseline, &base);
  for (Isa isa : SupportedLevels()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> got;
    run(isa, &got);
    ExpectClose(base, got, 2e-6, 1e-4, "grads, params after AdamW, loss");
  }
}

}  // namespace
}  // namespace ringmaster::trainer::cpu
