// bench_kernels' rows for the gradient-compression kernels of the multi-GPU path (docs/cuda.md
// "Several GPUs"): the wire codecs (kernels/wire_codec.h) on one BERT-base encoder layer's
// gradient, each validated byte for byte against the CPU codec (trainer/parallel/wire_codec.h), and
// PowerSGD's products (powersgd_kernels.h) on an FFN weight's gradient at rank 4 against
// double-precision loops. All are bandwidth-bound: their rows are set against the measured copy
// ceiling.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "trainer/cuda/bench/bench_kernels_ctx.h"
#include "trainer/cuda/bench/bench_kernels_util.h"
#include "trainer/cuda/kernels/powersgd_kernels.h"
#include "trainer/cuda/kernels/wire_codec.h"
#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer::cuda::bench {

void BenchCodecs(Ctx& c) {
  // One encoder layer's parameters: attention (4 H×H weights, 4 biases), the FFN (H×I, I×H and
  // their biases) and two LayerNorms: BERT-base's unit of communication (7,087,872 floats).
  const size_t H = c.H, I = c.I;
  const size_t n = 4 * H * H + 4 * H + 2 * H * I + I + H + 4 * H;
  const std::vector<float> grad = Normal(n, 1e-3f, 31), acc0 = Normal(n, 1e-3f, 32),
                           residual0 = Normal(n, 1e-5f, 33);
  const std::string shape = Dims({static_cast<int64_t>(n)});
  for (WireCodec codec : {WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    const std::string name(WireCodecName(codec));
    const size_t wire = EncodedBytes(codec, n);
    // int8 runs with error feedback, as in the reduce-scatter and the two-stage all-reduce.
    const bool feedback = codec == WireCodec::kInt8;
    std::vector<float> residual = residual0;
    std::vector<uint8_t> encoded(wire);
    Encode(codec, grad.data(), n, feedback ? residual.data() : nullptr, encoded.data());
    std::vector<float> acc = acc0;
    DecodeAdd(codec, encoded.data(), n, acc.data());

    Dev<float> dgrad(grad), dres(residual0), dacc(acc0);
    Dev<uint8_t> dwire(wire);
    Row e("wire_encode_" + name + (feedback ? "_ef" : ""), shape, "bw");
    e.bytes = 4.0 * n + wire + (feedback ? 8.0 * n : 0.0);  // x (+ residual read, written); out
    auto encode = [&](cudaStream_t s) {
      BENCH_CHECK(WireEncode(codec, dgrad.p(), n, feedback ? dres.p() : nullptr, dwire.p(), s));
    };
    encode(c.stream);
    Compare("encoded", encoded, dwire.Download(), 0, 0, &e.err);
    if (feedback) Compare("residual", residual, dres.Download(), 0, 0, &e.err);
    Row d("wire_decode_add_" + name, shape, "bw");
    d.bytes = wire + 8.0 * n;  // in; acc read and written
    auto decode_add = [&](cudaStream_t s) {
      BENCH_CHECK(WireDecodeAdd(codec, dwire.p(), n, dacc.p(), s));
    };
    decode_add(c.stream);
    Compare("acc", acc, dacc.Download(), 0, 0, &d.err);
    Record(c, e, encode);  // timing last: repeated calls move the residual and the sums
    Record(c, d, decode_add);
  }
}

void BenchPowerSgd(Ctx& c) {
  // The FFN output weight's gradient (I rows of H), the shape PowerSGD compresses most of.
  const int rows = c.I, cols = c.H, r = 4;
  const size_t n = static_cast<size_t>(rows) * cols;
  const std::vector<float> g = Normal(n, 1e-3f, 41), e = Normal(n, 1e-5f, 42),
                           q = Normal(static_cast<size_t>(cols) * r, 1.0f, 43);
  std::vector<float> m(n), p(static_cast<size_t>(rows) * r), qn(static_cast<size_t>(cols) * r);
  for (size_t i = 0; i < n; ++i) m[i] = g[i] + e[i];
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < r; ++k) {
      double s = 0;
      for (int j = 0; j < cols; ++j) s += double{m[size_t(i) * cols + j]} * q[size_t(j) * r + k];
      p[size_t(i) * r + k] = static_cast<float>(s);
    }
  }
  for (int j = 0; j < cols; ++j) {
    for (int k = 0; k < r; ++k) {
      double s = 0;
      for (int i = 0; i < rows; ++i) s += double{m[size_t(i) * cols + j]} * p[size_t(i) * r + k];
      qn[size_t(j) * r + k] = static_cast<float>(s);
    }
  }
  const float inv_world = 0.5f;  // as two ranks' sum
  std::vector<float> gnew(n), enew(n);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      double s = 0;
      for (int k = 0; k < r; ++k) s += double{p[size_t(i) * r + k]} * qn[size_t(j) * r + k];
      const size_t at = size_t(i) * cols + j;
      gnew[at] = static_cast<float>(s);
      const float left = m[at] - gnew[at] * inv_world;
      enew[at] = std::isfinite(left) ? left : 0.0f;
    }
  }
  Dev<float> dg(g), de(e), dq(q), dm(n), dp(p.size()), dqn(qn.size()), dgo(n), deo(n);
  const std::string shape = Dims({rows, cols}) + absl::StrFormat(" r=%d", r);
  const double mat = 4.0 * n, pb = 4.0 * p.size(), qb = 4.0 * qn.size();

  Row fm("powersgd_form_m", Dims({static_cast<int64_t>(n)}), "bw");
  fm.bytes = 3 * mat;
  auto form_m = [&](cudaStream_t s) { BENCH_CHECK(PowerSgdFormM(dg.p(), de.p(), dm.p(), n, s)); };
  form_m(c.stream);
  Compare("m", m, dm.Download(), 0, 0, &fm.err);
  Record(c, fm, form_m);
  // Each product on the reference's inputs, so each is checked alone. Sums of `cols` (`rows`)
  // products in fp32 on the device against double here.
  dm.Upload(m);
  Row mq("powersgd_m_q", shape, "bw");
  mq.bytes = mat + qb + pb;
  auto m_q = [&](cudaStream_t s) {
    BENCH_CHECK(PowerSgdMQ(dm.p(), dq.p(), dp.p(), rows, cols, r, s));
  };
  m_q(c.stream);
  Compare("p", p, dp.Download(), 1e-6, 1e-3, &mq.err);
  Record(c, mq, m_q);
  dp.Upload(p);
  Row mtp("powersgd_mt_p", shape, "bw");
  mtp.bytes = mat + pb + qb;
  auto mt_p = [&](cudaStream_t s) {
    BENCH_CHECK(PowerSgdMtP(dm.p(), dp.p(), dqn.p(), rows, cols, r, s));
  };
  mt_p(c.stream);
  Compare("qn", qn, dqn.Download(), 1e-6, 1e-3, &mtp.err);
  Record(c, mtp, mt_p);
  dqn.Upload(qn);
  Row cm("powersgd_commit", shape, "bw");
  cm.bytes = pb + qb + 3 * mat;  // p, q'; m read; g and e written
  auto commit = [&](cudaStream_t s) {
    BENCH_CHECK(
        PowerSgdCommit(dp.p(), dqn.p(), dm.p(), dgo.p(), deo.p(), rows, cols, r, inv_world, s));
  };
  commit(c.stream);
  Compare("g", gnew, dgo.Download(), 1e-9, 1e-4, &cm.err);
  Compare("e", enew, deo.Download(), 1e-9, 1e-3, &cm.err);
  Record(c, cm, commit);
}

}  // namespace ringmaster::trainer::cuda::bench
