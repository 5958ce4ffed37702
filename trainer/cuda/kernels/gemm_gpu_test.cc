// ctest-labels: gpu
// The cuBLASLt GEMM wrapper (row-major Linear forward/backward, batched attention products) and
// the bias-gradient kernel against the CPU model's own operations (cpu::LinearForward/Backward,
// cpu::Gemm). Skips cleanly (exit 77) where no CUDA device exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "trainer/cuda/device_array.h"
#include "trainer/cuda/kernels/bias_grad.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/model/autocast.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/cpu_half.h"
#include "trainer/model/cpu_ops.h"

#ifdef CUDA_EMU
#include "cuda_emu/cublaslt_emu_control.h"
#endif

namespace ringmaster::trainer::cuda {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// |got - ref| <= atol + rtol·|ref| everywhere; reports the first index that is not.
void ExpectClose(const std::vector<float>& ref, const std::vector<float>& got, float atol,
                 float rtol) {
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(got[i], ref[i], atol + rtol * std::abs(ref[i])) << "at " << i;
  }
}

// The absolute tolerance of a product of K terms whose factors are N(0, 1) times `scale`: the
// emulator's `emulated` (its stand-in sums in the CPU's order, so only FMA contraction differs),
// on a real GPU at least SumOrderBound (gpu_test_tolerance.h: cuBLASLt's tiles and split-K sum
// in another order) of Σ|a·b| <= scale·(2K/π + 6·√(K(1 − 4/π²))), the mean of Σ|a·b| for
// standard normal factors plus six standard deviations: 3.6e-4 for K = 48, 1.5e-5 for the
// scaled K = 8 scores. A wrong index, transpose or stride is off by O(1).
float Atol(float emulated, int K, double scale = 1.0) {
  const double abs_sum =
      scale * (2.0 * K / M_PI + 6.0 * std::sqrt(K * (1.0 - 4.0 / (M_PI * M_PI))));
  return static_cast<float>(
      GpuTolerance(emulated, std::max<double>(emulated, SumOrderBound(K, abs_sum))));
}

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    auto g = Gemm::Create();
    ASSERT_TRUE(g.ok()) << g.status();
    gemm_ = std::move(*g);
  }
  std::unique_ptr<Gemm> gemm_;
};

void LinearForwardWithAndWithoutBias(Gemm* gemm) {
  const int rows = 37, in = 48, out = 24;  // not multiples of any tile size
  const auto x = Random(rows * in, 1), w = Random(out * in, 2), b = Random(out, 3);
  for (bool with_bias : {true, false}) {
    std::vector<float> y(rows * out);
    cpu::LinearForward<float>(x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), rows,
                              in, out);
    DeviceArray<float> dx(x), dw(w), db(b), dy(static_cast<size_t>(rows * out));
    ASSERT_TRUE(
        gemm->LinearForward(dx.p, dw.p, with_bias ? db.p : nullptr, dy.p, rows, in, out, nullptr)
            .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(y, dy.Download(), Atol(1e-4f, in), 1e-5f);
  }
}

void LinearBackwardMatchesCpu(Gemm* gemm) {
  const int rows = 33, in = 40, out = 56;
  const auto x = Random(rows * in, 4), w = Random(out * in, 5), g = Random(rows * out, 6);
  const auto dw0 = Random(out * in, 7), dx0 = Random(rows * in, 8), db0 = Random(out, 9);
  for (bool accumulate_dx : {false, true}) {
    std::vector<float> dx = dx0, dw = dw0, db = db0;
    cpu::LinearBackward<float>(g.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), rows,
                               in, out, accumulate_dx);
    DeviceArray<float> d_x(x), d_w(w), d_g(g), d_dx(dx0), d_dw(dw0), d_db(db0),
        scratch(BiasGradientScratchFloats(rows, out));
    ASSERT_TRUE(
        gemm->LinearInputGrad(d_g.p, d_w.p, d_dx.p, rows, in, out, accumulate_dx, nullptr).ok());
    ASSERT_TRUE(gemm->LinearWeightGrad(d_g.p, d_x.p, d_dw.p, rows, in, out, nullptr).ok());
    ASSERT_EQ(BiasGradient(d_g.p, d_db.p, scratch.p, rows, out, /*accumulate=*/true, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(dx, d_dx.Download(), Atol(1e-4f, out), 1e-5f);
    ExpectClose(dw, d_dw.Download(), Atol(1e-4f, rows), 1e-5f);
    // The bias gradient is this project's kernel: the same summation order on a GPU as under
    // the emulator (no FMA in a sum), so one tolerance.
    ExpectClose(db, d_db.Download(), 1e-4f, 1e-5f);
  }
}

// Attention's products over (batch·heads) blocks laid out (BH, S, D): scores = Q·Kᵀ scaled,
// then context = P·V, against cpu::Gemm block by block.
void BatchedAttentionProducts(Gemm* gemm) {
  const int BH = 6, S = 19, D = 8;
  const auto q = Random(BH * S * D, 10), k = Random(BH * S * D, 11), v = Random(BH * S * D, 12);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> scores(BH * S * S), ctx(BH * S * D);
  for (int i = 0; i < BH; ++i) {
    cpu::Gemm<float>(false, true, S, S, D, scale, q.data() + i * S * D, D, k.data() + i * S * D, D,
                     0.0f, scores.data() + i * S * S, S);
    cpu::Gemm<float>(false, false, S, D, S, 1.0f, scores.data() + i * S * S, S,
                     v.data() + i * S * D, D, 0.0f, ctx.data() + i * S * D, D);
  }
  DeviceArray<float> dq(q), dk(k), dv(v), dscores(scores.size()), dctx(ctx.size());
  GemmProblem p;
  p.M = S, p.N = S, p.K = D, p.batch = BH, p.alpha = scale;
  p.a = {dq.p, CUDA_R_32F, false, D, S * D};
  p.b = {dk.p, CUDA_R_32F, true, D, S * D};
  p.c = dscores.p, p.ldc = S, p.c_batch_stride = S * S;
  ASSERT_TRUE(gemm->Run(p, nullptr).ok());
  GemmProblem pv;
  pv.M = S, pv.N = D, pv.K = S, pv.batch = BH;
  pv.a = {dscores.p, CUDA_R_32F, false, S, S * S};
  pv.b = {dv.p, CUDA_R_32F, false, D, S * D};
  pv.c = dctx.p, pv.ldc = D, pv.c_batch_stride = S * D;
  ASSERT_TRUE(gemm->Run(pv, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ExpectClose(scores, dscores.Download(), Atol(1e-5f, D, scale), 1e-5f);
  ExpectClose(ctx, dctx.Download(), Atol(1e-4f, S), 1e-5f);
}

// Mixed precision through the wrapper: Autocast casts the fp32 activation and the weight to bf16
// or fp16, the GEMM accumulates in fp32 and writes fp32 with the fp32 bias. Reference: the CPU
// Linear on the inputs rounded by cpu_half.h (exact products in fp32, so only summation order
// differs), which the result matches to fp32 rounding while differing from the unrounded
// product by the 16-bit rounding.
void Bf16AndFp16OperandsMatchTheRoundedInputReference(Gemm* gemm) {
  const int rows = 37, in = 48, out = 24;
  const auto x = Random(rows * in, 21), w = Random(out * in, 22), b = Random(out, 23);
  std::vector<float> exact(rows * out);
  cpu::LinearForward<float>(x.data(), w.data(), b.data(), exact.data(), rows, in, out);
  for (GemmPrecision prec : {GemmPrecision::kBf16, GemmPrecision::kFp16}) {
    auto round = [&](float v) {
      return prec == GemmPrecision::kBf16 ? cpu::Bf16ToFloat(cpu::Bf16Bits(v))
                                          : cpu::Fp16ToFloat(cpu::Fp16Bits(v));
    };
    std::vector<float> xr = x, wr = w, ref(rows * out);
    for (float& v : xr) v = round(v);
    for (float& v : wr) v = round(v);
    cpu::LinearForward<float>(xr.data(), wr.data(), b.data(), ref.data(), rows, in, out);
    // The weight is one unit of a flat layout of out·in floats.
    auto ac = Autocast::Create(prec, {0}, w.size(), nullptr);
    ASSERT_TRUE(ac.ok()) << ac.status();
    DeviceArray<float> dx(x), dw(w), db(b), dy(static_cast<size_t>(rows * out));
    ASSERT_TRUE((*ac)->PrepareUnit(0, dw.p).ok());
    GemmProblem p = Gemm::LinearForwardProblem(dx.p, (*ac)->Weight(dw.p, 0), CUDA_R_32F, db.p, dy.p,
                                               rows, in, out);
    p.b.type = (*ac)->type();
    ASSERT_TRUE((*ac)->Run(p, gemm).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = dy.Download();
    // The products of 16-bit inputs are exact in fp32: only the summation order differs.
    ExpectClose(ref, got, Atol(5e-5f, in), 1e-5f);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max<double>(worst, std::abs(got[i] - exact[i]));
    EXPECT_GT(worst, prec == GemmPrecision::kBf16 ? 1e-2 : 1e-3) << GemmPrecisionName(prec);
    EXPECT_EQ((*ac)->activation_casts(), 1u);
    EXPECT_EQ((*ac)->weight_casts(), 1u);
  }
  // Operands of two different types are refused by cuBLASLt (the wrapper passes its error on).
  DeviceArray<float> d(std::vector<float>(16, 1.0f)), c(std::vector<float>(16, 0.0f));
  GemmProblem mixed = Gemm::LinearForwardProblem(d.p, d.p, CUDA_R_16BF, nullptr, c.p, 2, 2, 2);
  mixed.b.type = CUDA_R_16F;
  EXPECT_FALSE(gemm->Run(mixed, nullptr).ok());
}

// The products above, each a test of the fixture: cuBLASLt's (GemmTest) and, with every
// candidate refused, the plain kernel's (GemmPlainTest).
#define RINGMASTER_GEMM_PRODUCT_TESTS(Fixture)                                         \
  TEST_F(Fixture, LinearForwardWithAndWithoutBias) {                                   \
    LinearForwardWithAndWithoutBias(gemm_.get());                                      \
  }                                                                                    \
  TEST_F(Fixture, LinearBackwardMatchesCpu) { LinearBackwardMatchesCpu(gemm_.get()); } \
  TEST_F(Fixture, BatchedAttentionProducts) { BatchedAttentionProducts(gemm_.get()); } \
  TEST_F(Fixture, Bf16AndFp16OperandsMatchTheRoundedInputReference) {                  \
    Bf16AndFp16OperandsMatchTheRoundedInputReference(gemm_.get());                     \
  }
RINGMASTER_GEMM_PRODUCT_TESTS(GemmTest)

TEST_F(GemmTest, BadShapeIsRefusedBeforeLaunch) {
  DeviceArray<float> a(16), c(16);
  GemmProblem p;
  p.M = 4, p.N = 4, p.K = 4;
  p.a = {a.p, CUDA_R_32F, false, /*ld=*/3, 0};  // ld < K columns
  p.b = {a.p, CUDA_R_32F, false, 4, 0};
  p.c = c.p, p.ldc = 4;
  const absl::Status s = gemm_->Run(p, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("lda=3"), std::string::npos) << s;
}

// ---- cuBLASLt refusing at run time (gemm.h): the emulator's stand-in refuses chosen candidates
// or misaligned operands as a real GPU's cuBLASLt can (emu/cublaslt_emu_control.h); the wrapper
// must try the next candidate, plan per alignment, or compute with its plain kernel, and give
// the CPU's answer every time.

// The emulator's refusals for one test, cleared after it. On a GPU the real cuBLASLt runs: only
// the misalignment test applies there (without the refusal switch).
class GemmRefusalTest : public GemmTest {
 protected:
  void TearDown() override {
#ifdef CUDA_EMU
    cuda_emu::blas::SetLtRefusals({});
#endif
  }
};

// Linear forward through the wrapper at row-major (rows, in) → (rows, out), with bias, against
// cpu::LinearForward; `offset` floats shift x, W and y off their allocations' alignment.
void CheckLinearForward(Gemm* gemm, int rows, int in, int out, int offset) {
  const auto x = Random(rows * in, 31), w = Random(out * in, 32), b = Random(out, 33);
  std::vector<float> y(rows * out);
  cpu::LinearForward<float>(x.data(), w.data(), b.data(), y.data(), rows, in, out);
  std::vector<float> xp(offset, 0.0f), wp(offset, 0.0f);
  xp.insert(xp.end(), x.begin(), x.end());
  wp.insert(wp.end(), w.begin(), w.end());
  DeviceArray<float> dx(xp), dw(wp), db(b), dy(static_cast<size_t>(rows * out + offset));
  const absl::Status s = gemm->LinearForward(dx.p + offset, dw.p + offset, db.p, dy.p + offset,
                                             rows, in, out, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got = dy.Download();
  got.erase(got.begin(), got.begin() + offset);
  ExpectClose(y, got, Atol(1e-4f, in), 1e-5f);
}

// An operand 4 bytes past a 256-byte-aligned allocation (a hidden size not a multiple of 4
// floats gives such views). With the alignment rule on, an algorithm the heuristic chose for
// aligned operands refuses it, as real cuBLASLt does. The aligned call comes first, so a plan
// cache that ignores alignment would reuse its algorithm for the misaligned one.
TEST_F(GemmRefusalTest, MisalignedOperandsGetTheirOwnPlan) {
#ifdef CUDA_EMU
  cuda_emu::blas::LtRefusals r;
  r.enforce_alignment = true;
  cuda_emu::blas::SetLtRefusals(r);
#endif
  ASSERT_NO_FATAL_FAILURE(CheckLinearForward(gemm_.get(), 37, 48, 24, 0));
  ASSERT_NO_FATAL_FAILURE(CheckLinearForward(gemm_.get(), 37, 48, 24, 1));
  ASSERT_NO_FATAL_FAILURE(CheckLinearForward(gemm_.get(), 37, 48, 24, 2));  // 8-byte aligned
#ifdef CUDA_EMU
  const cuda_emu::blas::LtCounters c = cuda_emu::blas::GetLtCounters();
  EXPECT_EQ(c.refused_alignment, 0) << "the alignment preferences should have prevented these";
  EXPECT_EQ(c.runs[0], 3);
#endif
}

#ifdef CUDA_EMU
TEST_F(GemmRefusalTest, RefusedFirstCandidateGivesWayToTheNextAndIsRemembered) {
  cuda_emu::blas::LtRefusals r;
  r.refuse_algos = 1u;  // candidate 0, every shape
  cuda_emu::blas::SetLtRefusals(r);
  ASSERT_NO_FATAL_FAILURE(CheckLinearForward(gemm_.get(), 37, 48, 24, 0));
  cuda_emu::blas::LtCounters c = cuda_emu::blas::GetLtCounters();
  EXPECT_EQ(c.refused_algo, 1);
  EXPECT_EQ(c.runs[0], 0);
  EXPECT_EQ(c.runs[1], 1);
  // The plan remembers candidate 1: the next call of the shape goes there directly.
  ASSERT_NO_FATAL_FAILURE(CheckLinearForward(gemm_.get(), 37, 48, 24, 0));
  c = cuda_emu::blas::GetLtCounters();
  EXPECT_EQ(c.refused_algo, 1);
  EXPECT_EQ(c.runs[1], 2);
  EXPECT_EQ(gemm_->stats().refused_candidates, 1);
  EXPECT_EQ(gemm_->stats().plain_runs, 0);
}

// The classifier: N = 2 labels with the bias epilogue, every cuBLASLt candidate refused for
// that shape (column-major m = 2), then no algorithm offered at all: the plain fp32 kernel.
TEST_F(GemmRefusalTest, ClassifierWithEveryCandidateRefusedUsesThePlainKernel) {
  for (bool none_found : {false, true}) {
    SCOPED_TRACE(none_found ? "heuristic offers none" : "every candidate refused");
    auto g = Gemm::Create();
    ASSERT_TRUE(g.ok()) << g.status();
    cuda_emu::blas::LtRefusals r;
    if (none_found) {
      r.none_found = true;
    } else {
      r.refuse_algos = ~0u;
    }
    r.only_m = 2;
    cuda_emu::blas::SetLtRefusals(r);
    ASSERT_NO_FATAL_FAILURE(CheckLinearForward(g->get(), 8, 40, 2, 0));
    const cuda_emu::blas::LtCounters c = cuda_emu::blas::GetLtCounters();
    EXPECT_EQ(c.refused_algo, none_found ? 0 : cuda_emu::blas::kLtCandidates);
    EXPECT_EQ(c.heuristic_none, none_found ? 1 : 0);
    for (int64_t runs : c.runs) EXPECT_EQ(runs, 0);
    EXPECT_EQ((*g)->stats().plain_runs, 1);
    // The plan remembers: no cuBLASLt call for the shape again.
    ASSERT_NO_FATAL_FAILURE(CheckLinearForward(g->get(), 8, 40, 2, 0));
    EXPECT_EQ(cuda_emu::blas::GetLtCounters().refused_algo, c.refused_algo);
    EXPECT_EQ((*g)->stats().plain_runs, 2);
    // Other shapes still run on cuBLASLt.
    ASSERT_NO_FATAL_FAILURE(CheckLinearForward(g->get(), 8, 40, 3, 0));
    EXPECT_EQ(cuda_emu::blas::GetLtCounters().runs[0], 1);
  }
}

// CUDA_EMU_CUBLASLT_REFUSE's syntax (the environment's way to the same refusals).
TEST(CublasLtRefusals, ParseTheEnvironmentSyntax) {
  cuda_emu::blas::LtRefusals r;
  std::string error;
  ASSERT_TRUE(cuda_emu::blas::ParseLtRefusals("first,m=2,aligned", &r, &error)) << error;
  EXPECT_EQ(r.refuse_algos, 1u);
  EXPECT_EQ(r.only_m, 2);
  EXPECT_EQ(r.only_n, -1);
  EXPECT_TRUE(r.enforce_alignment);
  EXPECT_FALSE(r.none_found);
  ASSERT_TRUE(cuda_emu::blas::ParseLtRefusals("all,none-found,k=40", &r, &error)) << error;
  EXPECT_EQ(r.refuse_algos, (1u << cuda_emu::blas::kLtCandidates) - 1);
  EXPECT_TRUE(r.none_found);
  EXPECT_EQ(r.only_k, 40);
  EXPECT_FALSE(cuda_emu::blas::ParseLtRefusals("first,bogus", &r, &error));
  EXPECT_NE(error.find("bogus"), std::string::npos) << error;
  EXPECT_FALSE(cuda_emu::blas::ParseLtRefusals("m=two", &r, &error));
}
#endif  // CUDA_EMU

// Every product of the tests above with every cuBLASLt candidate refused: the plain kernel's
// transposes, accumulation (beta = 1), poisoned C with beta = 0 and strided batches.
class GemmPlainTest : public GemmRefusalTest {
 protected:
  void SetUp() override {
#ifndef CUDA_EMU
    GTEST_SKIP() << "needs the emulator's cuBLASLt refusals (emu/cublaslt_emu_control.h)";
#else
    GemmRefusalTest::SetUp();
    cuda_emu::blas::LtRefusals r;
    r.refuse_algos = ~0u;
    cuda_emu::blas::SetLtRefusals(r);
#endif
  }
  void TearDown() override {
#ifdef CUDA_EMU
    for (int64_t runs : cuda_emu::blas::GetLtCounters().runs)
      EXPECT_EQ(runs, 0) << "ran on cuBLASLt";
#endif
    GemmRefusalTest::TearDown();
  }
};
RINGMASTER_GEMM_PRODUCT_TESTS(GemmPlainTest)

TEST(BiasGradient, DeterministicAndOverwrites) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const int rows = 300, C = 70;  // several row chunks and a partial column block
  const auto g = Random(rows * C, 13);
  std::vector<double> ref(C, 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < C; ++j) ref[j] += g[r * C + j];
  }
  DeviceArray<float> dg(g), db(static_cast<size_t>(C)), scratch(BiasGradientScratchFloats(rows, C));
  ASSERT_EQ(BiasGradient(dg.p, db.p, scratch.p, rows, C, /*accumulate=*/false, nullptr),
            cudaSuccess);
  const std::vector<float> first = db.Download();
  ASSERT_EQ(BiasGradient(dg.p, db.p, scratch.p, rows, C, /*accumulate=*/false, nullptr),
            cudaSuccess);
  const std::vector<float> second = db.Download();
  for (int j = 0; j < C; ++j) {
    EXPECT_NEAR(first[j], ref[j], 1e-3) << j;
    EXPECT_EQ(first[j], second[j]) << "not bit-reproducible at " << j;
  }
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
