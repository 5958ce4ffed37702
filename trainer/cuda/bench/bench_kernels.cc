// bench_kernels: every kernel of trainer/cuda/kernels/kernels.h and the Linear GEMM (fp32, and bf16
// through Autocast), and the gradient-compression kernels (bench_codecs.cc) at BERT-base training
// shapes (B=32, S=128, H=768, NH=12, I=3072; --small: tiny shapes). Each kernel is first checked
// against its CPU reference on the same input (a failure marks its row and makes the exit code 1),
// then timed with CUDA events. Rates are set against ceilings measured in the same run: a large
// device-to-device copy (bandwidth) and a large GEMM of the same precision (compute).
//
//   bench_kernels [--small] [--validate-only] [--json PATH] [--target-ms MS]
//
// Exit: 0 all valid, 1 a kernel failed validation or a CUDA call failed, 2 bad arguments, 77 no
// CUDA device. Under the emulator (RINGMASTER_CUDA_EMU=ON) the timings are CPU figures.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "jobspec/bert_config.h"
#include "trainer/cuda/bench/bench_kernels_ctx.h"
#include "trainer/cuda/bench/bench_kernels_util.h"
#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/model/autocast.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/bert_params.h"
#include "trainer/model/cpu_half.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/optim/adamw.h"

namespace ringmaster::trainer::cuda::bench {
namespace {

#ifdef CUDA_EMU
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

void BenchGelu(Ctx& c) {
  const size_t n = c.N() * c.I;
  const std::vector<float> x = Normal(n, 1.5f, 1), dy = Normal(n, 1.0f, 2);
  std::vector<float> y(n), dx(n);
  cpu::GeluForward(x.data(), y.data(), n);
  cpu::GeluBackward(dy.data(), x.data(), dx.data(), n);
  Dev<float> dx_in(x), ddy(dy), dy_out(n), ddx(n);
  const std::string shape = Dims({static_cast<int64_t>(c.N()), c.I});
  Row f("gelu_fwd", shape, "bw");
  f.bytes = 8.0 * n;
  BENCH_CHECK(GeluForward(dx_in.p(), dy_out.p(), n, c.stream));
  Compare("y", y, dy_out.Download(), 1e-6, 1e-5, &f.err);
  Record(c, f, [&](cudaStream_t s) { BENCH_CHECK(GeluForward(dx_in.p(), dy_out.p(), n, s)); });
  Row b("gelu_bwd", shape, "bw");
  b.bytes = 12.0 * n;
  BENCH_CHECK(GeluBackward(ddy.p(), dx_in.p(), ddx.p(), n, c.stream));
  Compare("dx", dx, ddx.Download(), 1e-6, 1e-5, &b.err);
  Record(c, b,
         [&](cudaStream_t s) { BENCH_CHECK(GeluBackward(ddy.p(), dx_in.p(), ddx.p(), n, s)); });
}

void BenchLayerNorm(Ctx& c) {
  const int N = static_cast<int>(c.N()), H = c.H;
  const size_t nh = c.N() * H;
  const float eps = 1e-12f;
  const std::vector<float> x = Normal(nh, 2.0f, 3), gamma = Normal(H, 1.0f, 4),
                           beta = Normal(H, 1.0f, 5), dy = Normal(nh, 1.0f, 6);
  std::vector<float> y(nh), mean(N), rstd(N), dx(nh), dg(H, 0.0f), db(H, 0.0f);
  cpu::LayerNormForward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), N,
                        H, eps);
  cpu::LayerNormBackward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                         dg.data(), db.data(), N, H);
  Dev<float> dxin(x), dgamma(gamma), dbeta(beta), dyout(nh), dmean(N), drstd(N), ddy(dy), ddx(nh),
      ddg(std::vector<float>(H, 0.0f)), ddb(std::vector<float>(H, 0.0f)),
      scratch(LayerNormBackwardScratchFloats(N, H));
  const std::string shape = Dims({N, H});
  Row f("layernorm_fwd", shape, "bw");
  f.bytes = 4.0 * (2.0 * nh + 2.0 * H + 2.0 * N);
  auto fwd = [&](cudaStream_t s) {
    BENCH_CHECK(LayerNormForward(dxin.p(), dgamma.p(), dbeta.p(), dyout.p(), dmean.p(), drstd.p(),
                                 N, H, eps, s));
  };
  fwd(c.stream);
  Compare("y", y, dyout.Download(), 1e-4, 1e-4, &f.err);
  Compare("mean", mean, dmean.Download(), 1e-5, 1e-5, &f.err);
  Compare("rstd", rstd, drstd.Download(), 1e-5, 1e-4, &f.err);
  Record(c, f, fwd);
  // The kernel reads the saved mean/rstd: use the reference's, so backward is checked alone.
  dmean.Upload(mean);
  drstd.Upload(rstd);
  Row b("layernorm_bwd", shape, "bw");
  b.bytes = 4.0 * (3.0 * nh + H + 2.0 * N + 4.0 * H);  // dy, x, gamma, mean, rstd; dx; dγ, dβ
  auto bwd = [&](cudaStream_t s) {
    BENCH_CHECK(LayerNormBackward(ddy.p(), dxin.p(), dgamma.p(), dmean.p(), drstd.p(), ddx.p(),
                                  ddg.p(), ddb.p(), scratch.p(), N, H, s));
  };
  bwd(c.stream);
  Compare("dx", dx, ddx.Download(), 1e-4, 1e-3, &b.err);
  Compare("dgamma", dg, ddg.Download(), 1e-3, 1e-3, &b.err);
  Compare("dbeta", db, ddb.Download(), 1e-3, 1e-3, &b.err);
  Record(c, b, bwd);
}

void BenchSoftmax(Ctx& c) {
  const int B = c.B, NH = c.NH, S = c.S;
  const size_t block = static_cast<size_t>(S) * S, e = static_cast<size_t>(B) * NH * block;
  const float scale = 0.125f;
  const std::vector<float> scores = Normal(e, 3.0f, 7), dp = Normal(e, 1.0f, 8);
  std::vector<float> bias(static_cast<size_t>(B) * S, 0.0f);
  for (int b = 0; b < B; ++b) {  // key padding: the last b % (S/2) keys of batch b masked
    for (int k = S - b % (S / 2); k < S; ++k) bias[static_cast<size_t>(b) * S + k] = -10000.0f;
  }
  std::vector<float> probs = scores, ds = dp;
  for (int bh = 0; bh < B * NH; ++bh) {
    float* p = probs.data() + bh * block;
    cpu::MaskedSoftmaxForward(p, bias.data() + static_cast<size_t>(bh / NH) * S, S, scale);
    cpu::MaskedSoftmaxBackward<float>(p, ds.data() + bh * block, S, scale);
  }
  Dev<float> dsc(scores), dbias(bias), dprobs(probs), dds(dp);
  const std::string shape = Dims({B, NH, S, S});
  Row f("softmax_fwd", shape, "bw");
  f.bytes = 8.0 * e + 4.0 * B * S;
  // In place: repeated timing calls renormalise probabilities, the same work.
  auto fwd = [&](cudaStream_t s) {
    BENCH_CHECK(MaskedSoftmaxForward(dsc.p(), dbias.p(), B, NH, S, scale, s));
  };
  fwd(c.stream);
  Compare("probs", probs, dsc.Download(), 1e-6, 1e-4, &f.err);
  Record(c, f, fwd);
  Row b("softmax_bwd", shape, "bw");
  b.bytes = 12.0 * e;
  auto bwd = [&](cudaStream_t s) {
    BENCH_CHECK(MaskedSoftmaxBackward(dprobs.p(), dds.p(), B, NH, S, scale, s));
  };
  bwd(c.stream);
  Compare("dscores", ds, dds.Download(), 1e-5, 1e-3, &b.err);
  Record(c, b, bwd);
}

void BenchDropout(Ctx& c) {
  const size_t n = c.N() * c.H;
  const float p = 0.1f;
  const uint64_t seed = 1234;
  const std::vector<float> x = Normal(n, 1.0f, 9), d = Normal(n, 1.0f, 10);
  std::vector<float> y = x, mask(n), dx = d;
  cpu::DropoutForward(y.data(), mask.data(), n, p, seed);
  cpu::DropoutBackward(dx.data(), mask.data(), n, p);
  Dev<float> dxv(x), dmask(n), dd(d);
  const std::string shape = Dims({static_cast<int64_t>(c.N()), c.H});
  Row f("dropout_fwd", shape, "bw");
  f.bytes = 12.0 * n;  // x read and written, mask written
  auto fwd = [&](cudaStream_t s) {
    BENCH_CHECK(DropoutForward(dxv.p(), dmask.p(), n, p, seed, s));
  };
  fwd(c.stream);
  Compare("x", y, dxv.Download(), 0, 1e-6, &f.err);
  Compare("mask", mask, dmask.Download(), 0, 0, &f.err);
  Record(c, f, fwd);
  dmask.Upload(mask);
  Row b("dropout_bwd", shape, "bw");
  b.bytes = 12.0 * n;
  auto bwd = [&](cudaStream_t s) { BENCH_CHECK(DropoutBackward(dd.p(), dmask.p(), n, p, s)); };
  bwd(c.stream);
  Compare("dx", dx, dd.Download(), 0, 1e-6, &b.err);
  Record(c, b, bwd);
}

void BenchAdamW(Ctx& c) {
  const ParamLayout layout = MakeBertParamLayout(c.model);
  const size_t n = layout.total;
  std::vector<uint8_t> decay(n, 0);
  for (const ParamSpec& s : layout.specs) {
    std::fill(decay.begin() + s.offset, decay.begin() + s.offset + s.numel, s.weight_decay);
  }
  AdamWOptions opt;
  opt.weight_decay = 0.01;
  AdamW ref(layout, opt);
  std::vector<float> params = Normal(n, 0.05f, 11);
  const std::vector<float> g = Normal(n, 0.01f, 12);
  Dev<float> dp(params), dg(g), dm(std::vector<float>(n, 0.0f)), dv(std::vector<float>(n, 0.0f));
  Dev<uint8_t> dmask(decay);
  const double lr = 1e-4;
  ref.Step(params.data(), g.data(), lr);
  // Every timed call is step 1 again: the same arithmetic as any later step.
  auto step = [&](cudaStream_t s) {
    BENCH_CHECK(AdamWStep(dp.p(), dg.p(), dm.p(), dv.p(), dmask.p(), n, 1, lr, opt.beta1, opt.beta2,
                          opt.eps, opt.weight_decay, s));
  };
  Row r("adamw", absl::StrFormat("(%d) params", n), "bw");
  r.bytes = 28.0 * n + n;  // params, grads, m, v read; params, m, v written; decay mask
  step(c.stream);
  Compare("params", params, dp.Download(), 1e-7, 1e-5, &r.err);
  Compare("exp_avg", ref.exp_avg(), dm.Download(), 1e-9, 1e-5, &r.err);
  Compare("exp_avg_sq", ref.exp_avg_sq(), dv.Download(), 1e-12, 1e-5, &r.err);
  Record(c, r, step);
}

void BenchEmbedding(Ctx& c) {
  const int B = c.B, S = c.S, H = c.H, T = c.T, V = c.model.vocab_size, pad = 0;
  const size_t N = c.N(), nh = N * H;
  std::mt19937 rng(13);
  std::vector<int32_t> ids(N), types(N);
  for (size_t r = 0; r < N; ++r) {
    ids[r] = static_cast<int32_t>(rng() % V);
    types[r] = static_cast<int32_t>(rng() % T);
  }
  const std::vector<float> word = Normal(static_cast<size_t>(V) * H, 1.0f, 14),
                           pos = Normal(static_cast<size_t>(S) * H, 1.0f, 15),
                           type = Normal(static_cast<size_t>(T) * H, 1.0f, 16),
                           d = Normal(nh, 1.0f, 17);
  // Reference: BertModel's embedding loops; gradients accumulate into zeroed tables.
  std::vector<float> out(nh), gw(word.size(), 0.0f), gp(pos.size(), 0.0f), gt(type.size(), 0.0f);
  for (size_t r = 0; r < N; ++r) {
    const size_t s = r % S, w = static_cast<size_t>(ids[r]), t = static_cast<size_t>(types[r]);
    for (int j = 0; j < H; ++j) {
      out[r * H + j] = word[w * H + j] + pos[s * H + j] + type[t * H + j];
      if (ids[r] != pad) gw[w * H + j] += d[r * H + j];
      gp[s * H + j] += d[r * H + j];
      gt[t * H + j] += d[r * H + j];
    }
  }
  Dev<int32_t> dids(ids), dtypes(types);
  Dev<float> dword(word), dpos(pos), dtype(type), dout(nh), dd(d),
      dgw(std::vector<float>(gw.size(), 0.0f)), dgp(std::vector<float>(gp.size(), 0.0f)),
      dgt(std::vector<float>(gt.size(), 0.0f));
  const std::string shape = Dims({B, S, H}) + absl::StrFormat(" V=%d", V);
  Row f("embedding_fwd", shape, "bw");
  f.bytes = 8.0 * N + 16.0 * nh;  // ids, types; a word, position and type row per token; out
  auto fwd = [&](cudaStream_t s) {
    BENCH_CHECK(EmbeddingForward(dids.p(), dtypes.p(), dword.p(), dpos.p(), dtype.p(), dout.p(), B,
                                 S, H, s));
  };
  fwd(c.stream);
  Compare("out", out, dout.Download(), 1e-6, 1e-6, &f.err);
  Record(c, f, fwd);
  Row b("embedding_bwd", shape, "bw");
  // d, ids, types read; per token a word row read and written; position and type tables
  // read and written once.
  b.bytes = 8.0 * N + 4.0 * nh + 8.0 * nh + 8.0 * (pos.size() + type.size());
  auto bwd = [&](cudaStream_t s) {
    BENCH_CHECK(EmbeddingBackward(dd.p(), dids.p(), dtypes.p(), dgw.p(), dgp.p(), dgt.p(), B, S, H,
                                  T, pad, s));
  };
  bwd(c.stream);
  Compare("gword", gw, dgw.Download(), 1e-4, 1e-5, &b.err);
  Compare("gpos", gp, dgp.Download(), 1e-4, 1e-5, &b.err);
  Compare("gtype", gt, dgt.Download(), 1e-2, 1e-5, &b.err);  // sums of B·S/T terms
  Record(c, b, bwd);
}

void BenchLoss(Ctx& c) {
  const int B = c.B, C = c.C;
  const float w = 1.0f;
  const std::vector<float> logits = Normal(static_cast<size_t>(B) * C, 3.0f, 18);
  std::vector<float> labels(B);
  for (int b = 0; b < B; ++b) labels[b] = static_cast<float>((b * 7) % C);
  // Reference: BertModel's cross-entropy and its gradient.
  std::vector<float> loss(B), dlog(logits.size());
  for (int b = 0; b < B; ++b) {
    const float* z = logits.data() + static_cast<size_t>(b) * C;
    float* dz = dlog.data() + static_cast<size_t>(b) * C;
    const float mx = *std::max_element(z, z + C);
    float sum = 0;
    for (int k = 0; k < C; ++k) sum += std::exp(z[k] - mx);
    loss[b] = std::log(sum) + mx - z[static_cast<int>(labels[b])];
    for (int k = 0; k < C; ++k) dz[k] = std::exp(z[k] - mx) / sum * w / B;
    dz[static_cast<int>(labels[b])] -= w / B;
  }
  Dev<float> dl(logits), dlab(labels), dloss(B), dgrad(logits.size());
  const std::string shape = Dims({B, C});
  Row f("loss_fwd", shape, "bw");
  f.bytes = 4.0 * (B * C + 2.0 * B);
  auto fwd = [&](cudaStream_t s) {
    BENCH_CHECK(ClassificationLossForward(dl.p(), dlab.p(), dloss.p(), B, C, s));
  };
  fwd(c.stream);
  Compare("loss", loss, dloss.Download(), 1e-5, 1e-5, &f.err);
  Record(c, f, fwd);
  Row b("loss_bwd", shape, "bw");
  b.bytes = 4.0 * (2.0 * B * C + B);
  auto bwd = [&](cudaStream_t s) {
    BENCH_CHECK(ClassificationLossBackward(dl.p(), dlab.p(), dgrad.p(), B, C, w, s));
  };
  bwd(c.stream);
  Compare("dlogits", dlog, dgrad.Download(), 1e-7, 1e-5, &b.err);
  Record(c, b, bwd);
}

void BenchGradNorm(Ctx& c) {
  const size_t n = MakeBertParamLayout(c.model).total;
  const std::vector<float> g = Normal(n, 0.01f, 19);
  const double ref_norm = trainer::GradNorm(g.data(), n);
  const double max_norm = ref_norm / 2;  // so that clipping scales
  std::vector<float> clipped = g;
  trainer::ClipGradNorm(clipped.data(), n, max_norm);
  Dev<float> dg(g), dc(g);
  Dev<double> scratch(GradNormScratchDoubles(n)), norm(1);
  const std::string shape = absl::StrFormat("(%d) params", n);
  Row f("grad_norm", shape, "bw");
  f.bytes = 4.0 * n;
  auto gn = [&](cudaStream_t s) { BENCH_CHECK(GradNorm(dg.p(), n, scratch.p(), norm.p(), s)); };
  gn(c.stream);
  Compare("norm", std::vector<double>{ref_norm}, norm.Download(), 0, 1e-9, &f.err);
  Record(c, f, gn);
  Row b("clip_grad_norm", shape, "bw");
  b.bytes = 12.0 * n;  // the norm's read, then the scaling's read and write
  auto clip = [&](cudaStream_t s) {
    BENCH_CHECK(ClipGradNorm(dc.p(), n, max_norm, scratch.p(), norm.p(), s));
  };
  clip(c.stream);
  Compare("norm", std::vector<double>{ref_norm}, norm.Download(), 0, 1e-9, &b.err);
  Compare("grads", clipped, dc.Download(), 1e-9, 1e-6, &b.err);
  Record(c, b, clip);  // later calls find norm <= max_norm (the same reads, fewer writes)
}

void BenchCasts(Ctx& c) {
  const size_t n = c.N() * c.I;
  const std::vector<float> x = Normal(n, 4.0f, 20);
  std::vector<uint16_t> bf(n), fp(n);
  for (size_t i = 0; i < n; ++i) {
    bf[i] = cpu::Bf16Bits(x[i]);
    fp[i] = cpu::Fp16Bits(x[i]);
  }
  Dev<float> dx(x);
  Dev<uint16_t> dbf(n), dfp(n);
  const std::string shape = Dims({static_cast<int64_t>(c.N()), c.I});
  Row b("cast_bf16", shape, "bw");
  b.bytes = 6.0 * n;
  auto to_bf = [&](cudaStream_t s) {
    BENCH_CHECK(CastToBf16(dx.p(), reinterpret_cast<__nv_bfloat16*>(dbf.p()), n, s));
  };
  to_bf(c.stream);
  Compare("bits", bf, dbf.Download(), 0, 0, &b.err);
  Record(c, b, to_bf);
  Row h("cast_fp16", shape, "bw");
  h.bytes = 6.0 * n;
  auto to_fp = [&](cudaStream_t s) {
    BENCH_CHECK(CastToFp16(dx.p(), reinterpret_cast<__half*>(dfp.p()), n, s));
  };
  to_fp(c.stream);
  Compare("bits", fp, dfp.Download(), 0, 0, &h.err);
  Record(c, h, to_fp);
  // ScaleInPlace validated with 0.5; timed with 1.0 so that repeated calls keep the values.
  Dev<float> dsc(x);
  std::vector<float> half = x;
  for (float& v : half) v *= 0.5f;
  Row s("scale_in_place", shape, "bw");
  s.bytes = 8.0 * n;
  BENCH_CHECK(ScaleInPlace(dsc.p(), n, 0.5f, c.stream));
  Compare("x", half, dsc.Download(), 0, 0, &s.err);
  Record(c, s, [&](cudaStream_t st) { BENCH_CHECK(ScaleInPlace(dsc.p(), n, 1.0f, st)); });
}

void OkOrThrow(const absl::Status& s) {
  if (!s.ok()) throw BenchError(std::string(s.message()));
}

// Linear forward y = x·Wᵀ + b at the FFN's first product (rows B·S, in H, out I), fp32, then bf16
// through Autocast as the trainer runs it (the timed call includes casting x; W is cast once).
void BenchLinear(Ctx& c, Gemm* gemm) {
  const int64_t rows = static_cast<int64_t>(c.N()), in = c.H, out = c.I;
  const std::vector<float> x = Normal(rows * in, 1.0f, 21), w = Normal(out * in, 0.05f, 22),
                           bias = Normal(out, 0.1f, 23);
  std::vector<float> y(rows * out);
  cpu::LinearForward(x.data(), w.data(), bias.data(), y.data(), static_cast<int>(rows),
                     static_cast<int>(in), static_cast<int>(out));
  Dev<float> dx(x), dw(w), db(bias), dy(rows * out);
  const std::string shape = absl::StrFormat("(%d,%d)x(%d,%d)^T", rows, in, out, in);
  const double flops = 2.0 * rows * in * out;
  Row f("linear_fwd_fp32", shape, "fp32");
  f.flops = flops;
  auto fwd = [&](cudaStream_t s) {
    OkOrThrow(gemm->LinearForward(dx.p(), dw.p(), db.p(), dy.p(), rows, in, out, s));
  };
  fwd(c.stream);
  Compare("y", y, dy.Download(), 1e-3, 1e-3, &f.err);
  Record(c, f, fwd);

  // bf16 reference: the same product of the bf16-rounded operands, accumulated in fp32.
  std::vector<float> xr(x.size()), wr(w.size()), yr(y.size());
  for (size_t i = 0; i < x.size(); ++i) xr[i] = cpu::Bf16ToFloat(cpu::Bf16Bits(x[i]));
  for (size_t i = 0; i < w.size(); ++i) wr[i] = cpu::Bf16ToFloat(cpu::Bf16Bits(w[i]));
  cpu::LinearForward(xr.data(), wr.data(), bias.data(), yr.data(), static_cast<int>(rows),
                     static_cast<int>(in), static_cast<int>(out));
  auto ac = Autocast::Create(GemmPrecision::kBf16, {0}, w.size(), c.stream);
  OkOrThrow(ac.status());
  OkOrThrow((*ac)->PrepareUnit(0, dw.p()));
  Row b("linear_fwd_bf16", shape + " ac", "bf16");
  b.flops = flops;
  // As CudaBertModel::LinearFwd: x stays fp32 (Autocast casts it), W is the 16-bit copy.
  GemmProblem p16 = Gemm::LinearForwardProblem(dx.p(), (*ac)->Weight(dw.p(), 0), CUDA_R_32F, db.p(),
                                               dy.p(), rows, in, out);
  p16.b.type = (*ac)->type();
  auto fwd16 = [&](cudaStream_t) { OkOrThrow((*ac)->Run(p16, gemm)); };
  fwd16(c.stream);
  Compare("y", yr, dy.Download(), 2e-3, 2e-3, &b.err);
  Record(c, b, fwd16);
}

// Ceilings: a device-to-device copy (read + write counted) and square GEMMs.
Ceilings MeasureCeilings(Ctx& c, Gemm* gemm, bool small) {
  Ceilings out;
  const size_t copy_bytes = small ? (8u << 20) : (1u << 30);
  Dev<uint8_t> a(copy_bytes), b(copy_bytes);
  BENCH_CHECK(cudaMemsetAsync(a.p(), 1, copy_bytes, c.stream));
  const double copy_ms = TimeMs(
      [&](cudaStream_t s) {
        BENCH_CHECK(cudaMemcpyAsync(b.p(), a.p(), copy_bytes, cudaMemcpyDeviceToDevice, s));
      },
      c.stream, c.target_ms);
  out.bw_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;

  const int64_t n = small ? 128 : 8192;
  Dev<float> x(Normal(n * n, 1.0f, 24)), y(n * n);
  Dev<uint16_t> x16(n * n);
  BENCH_CHECK(CastToBf16(x.p(), reinterpret_cast<__nv_bfloat16*>(x16.p()), n * n, c.stream));
  const double flops = 2.0 * n * n * n;
  for (auto [type, ptr, dst] :
       {std::tuple{CUDA_R_32F, static_cast<const void*>(x.p()), &out.fp32_tflops},
        std::tuple{CUDA_R_16BF, static_cast<const void*>(x16.p()), &out.bf16_tflops}}) {
    const GemmProblem p = Gemm::LinearForwardProblem(ptr, ptr, type, nullptr, y.p(), n, n, n);
    const double ms =
        TimeMs([&](cudaStream_t s) { OkOrThrow(gemm->Run(p, s)); }, c.stream, c.target_ms);
    *dst = flops / (ms * 1e-3) / 1e12;
  }
  return out;
}

int Main(int argc, char** argv) {
  Ctx c;
  bool small = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--small") {
      small = true;
    } else if (a == "--validate-only") {
      c.timed = false;
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--target-ms" && i + 1 < argc) {
      c.target_ms = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "bench_kernels: unknown argument '%s'\nusage: bench_kernels [--small] "
                   "[--validate-only] [--json PATH] [--target-ms MS]\n",
                   a.c_str());
      return 2;
    }
  }
  if (!HaveGpu()) {
    std::printf("bench_kernels: no CUDA device: skipped\n");
    return 77;
  }
  if (small) {
    c.B = 2, c.S = 16, c.H = 32, c.NH = 2, c.I = 64, c.C = 3;
    c.model.vocab_size = 50, c.model.hidden_size = 32, c.model.num_hidden_layers = 2;
    c.model.num_attention_heads = 2, c.model.intermediate_size = 64;
    c.model.max_position_embeddings = 16;
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string device = prop.name;
  std::printf("bench_kernels: %s, %s shapes, %s\n", device.c_str(),
              small ? "--small" : "BERT-base (B=32 S=128 H=768 NH=12 I=3072)",
              c.timed ? "validated then timed" : "validation only");
  if (kEmulated) {
    std::printf(
        "bench_kernels: EMULATOR build: kernels run on the CPU; timings are NOT GPU figures\n");
  }
  BENCH_CHECK(cudaStreamCreate(&c.stream));
  auto gemm = Gemm::Create(/*tf32=*/false);
  OkOrThrow(gemm.status());
  Ceilings ceil;
  if (c.timed) {
    ceil = MeasureCeilings(c, gemm->get(), small);
    std::printf("ceilings: copy %.1f GB/s, fp32 GEMM %.2f TFLOP/s, bf16 GEMM %.2f TFLOP/s\n",
                ceil.bw_gbs, ceil.fp32_tflops, ceil.bf16_tflops);
  }
  BenchGelu(c);
  BenchLayerNorm(c);
  BenchSoftmax(c);
  BenchDropout(c);
  BenchAdamW(c);
  BenchEmbedding(c);
  BenchLoss(c);
  BenchGradNorm(c);
  BenchCasts(c);
  BenchLinear(c, gemm->get());
  BenchCodecs(c);
  BenchPowerSgd(c);
  BENCH_CHECK(cudaStreamSynchronize(c.stream));
  PrintTable(c.rows, ceil, c.timed);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << Json(c.rows, ceil, kEmulated, small, c.timed, device);
    if (!f) throw BenchError("cannot write " + json_path);
  }
  int failed = 0;
  for (const Row& r : c.rows) failed += r.err.ok ? 0 : 1;
  std::printf("bench_kernels: %zu kernels, %d failed validation\n", c.rows.size(), failed);
  cudaStreamDestroy(c.stream);
  return failed > 0 ? 1 : 0;
}

}  // namespace
}  // namespace ringmaster::trainer::cuda::bench

int main(int argc, char** argv) {
  try {
    return ringmaster::trainer::cuda::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: FAIL: %s\n", e.what());
    return 1;
  }
}
