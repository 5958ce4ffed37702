// ctest-labels: gpu;emulated
// The cuBLAS(Lt) stand-ins against an independent reference written from the cuBLAS
// documentation's definition: D = alpha·op(A)·op(B) + beta·C, column-major, element (i, j) of a
// matrix with leading dimension ld at i + j·ld, batch b at b·stride; the reference sums in
// double. Epilogue references come from cuBLASLt's header comments (bias: m elements broadcast
// along the columns; GELU_AUX: the GELU input stored in aux; DGELU: multiply by GELU'(aux),
// checked against a finite difference of GELU; BGRAD: sums over the named dimension).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

// ---- Reference, from the documented definition -------------------------------------------

struct Mat {  // Column-major view: element (i, j) of batch b at i + j*ld + b*stride.
  const float* p;
  int ld;
  long long stride = 0;
  float at(int i, int j, int b = 0) const {
    return p[i + static_cast<long long>(j) * ld + b * stride];
  }
};

// op(X)(i, j) for op = N: X(i, j); for op = T: X(j, i).
float OpAt(const Mat& x, bool trans, int i, int j, int b) {
  return trans ? x.at(j, i, b) : x.at(i, j, b);
}

// Returns D for batch b as an m x n column-major dense vector (ld m), in double then rounded.
std::vector<double> RefGemm(bool ta, bool tb, int m, int n, int k, double alpha, const Mat& a,
                            const Mat& b, double beta, const Mat* c, int batch_index) {
  std::vector<double> d(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        s += static_cast<double>(OpAt(a, ta, i, p, batch_index)) * OpAt(b, tb, p, j, batch_index);
      }
      d[i + static_cast<size_t>(j) * m] =
          alpha * s + (c != nullptr && beta != 0 ? beta * c->at(i, j, batch_index) : 0.0);
    }
  }
  return d;
}

double GeluTanhRef(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double GeluErfRef(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// ---- Device helpers ------------------------------------------------------------------------

template <typename T>
T* Upload(const std::vector<T>& h) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> Download(const T* p, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |got - want| <= tol * (1 + |want|) for D's m x n elements (got has leading dimension ld).
void ExpectClose(const std::vector<double>& want, const std::vector<float>& got, int m, int n,
                 int ld, double tol, const std::string& what, size_t got_offset = 0) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const double w = want[i + static_cast<size_t>(j) * m];
      const double g = got[got_offset + i + static_cast<size_t>(j) * ld];
      ASSERT_LE(std::fabs(g - w), tol * (1 + std::fabs(w)))
          << what << ": element (" << i << ", " << j << ") got " << g << " want " << w;
    }
  }
}

// A cublasLtMatmul call described plainly; Run builds the descriptors the way a caller would.
struct LtCall {
  bool ta = false, tb = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const void* a = nullptr;
  cudaDataType_t a_type = CUDA_R_32F;
  int lda = 0;
  const void* b = nullptr;
  cudaDataType_t b_type = CUDA_R_32F;
  int ldb = 0;
  const void* c = nullptr;
  cudaDataType_t c_type = CUDA_R_32F;
  int ldc = 0;
  void* d = nullptr;
  cudaDataType_t d_type = CUDA_R_32F;
  int ldd = 0;
  int batch = 1;
  long long stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  const void* aux = nullptr;
  long long aux_ld = 0;

  cublasStatus_t Run(cublasLtHandle_t h) const {
    cublasLtMatmulDesc_t desc;
    cublasStatus_t st = cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t ep = epilogue;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa),
              0);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb),
              0);
    st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    if (bias != nullptr) {
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof bias),
                0);
    }
    if (aux != nullptr) {
      const int64_t ld = aux_ld;
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                               &aux, sizeof aux),
                0);
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                               sizeof ld),
                0);
    }
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatrixLayoutCreate(&la, a_type, ta ? k : m, ta ? m : k, lda);
    cublasLtMatrixLayoutCreate(&lb, b_type, tb ? n : k, tb ? k : n, ldb);
    cublasLtMatrixLayoutCreate(&lc, c_type, m, n, ldc);
    cublasLtMatrixLayoutCreate(&ld, d_type, m, n, ldd);
    const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
        {la, stride_a}, {lb, stride_b}, {lc, stride_c}, {ld, stride_d}};
    for (const auto& [l, stride] : layouts) {
      const int32_t count = batch;
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                 sizeof count),
                0);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &stride, sizeof stride),
                0);
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulPreference_t pref;
      cublasLtMatmulPreferenceCreate(&pref);
      const uint64_t ws = 1 << 20;
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws),
                0);
      cublasLtMatmulHeuristicResult_t result;
      int returned = 0;
      st = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 1, &result, &returned);
      if (st == CUBLAS_STATUS_SUCCESS) {
        EXPECT_EQ(returned, 1);
        st = cublasLtMatmul(h, desc, &alpha, a, la, b, lb, &beta, c, lc, d, ld, &result.algo,
                            nullptr, 0, nullptr);
      }
      cublasLtMatmulPreferenceDestroy(pref);
    }
    for (auto l : {la, lb, lc, ld}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    return st;
  }
};

class CublasLtEmuTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasLtCreate(&h_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override {
    cublasLtDestroy(h_);
    unsetenv("CUDA_EMU_CUBLASLT_GELU");
  }
  cublasLtHandle_t h_ = nullptr;
};

TEST_F(CublasLtEmuTest, EveryTransposeCombinationWithPaddedLeadingDimensions) {
  const int m = 5, n = 7, k = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int a_rows = ta ? k : m, a_cols = ta ? m : k;
      const int b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int lda = a_rows + 2, ldb = b_rows + 1, ldd = m + 3;
      const auto a = Random(lda * a_cols, 1), b = Random(ldb * b_cols, 2);
      std::vector<float> d_init(ldd * n, 12345.0f);  // Padding rows must stay untouched.
      float *da = Upload(a), *db = Upload(b), *dd = Upload(d_init);
      LtCall call;
      call.ta = ta, call.tb = tb, call.m = m, call.n = n, call.k = k, call.alpha = 1.5f;
      call.a = da, call.lda = lda, call.b = db, call.ldb = ldb;
      call.c = dd, call.ldc = ldd, call.d = dd, call.ldd = ldd;
      ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
      const auto got = Download(dd, d_init.size());
      const std::string what =
          std::string("op(A)=") + (ta ? "T" : "N") + " op(B)=" + (tb ? "T" : "N");
      ExpectClose(RefGemm(ta, tb, m, n, k, 1.5, {a.data(), lda}, {b.data(), ldb}, 0, nullptr, 0),
                  got, m, n, ldd, 1e-5, what);
      for (int j = 0; j < n; ++j) {
        for (int i = m; i < ldd; ++i) EXPECT_EQ(got[i + j * ldd], 12345.0f) << what;
      }
      cudaFree(da), cudaFree(db), cudaFree(dd);
    }
  }
}

TEST_F(CublasLtEmuTest, AlphaBetaWithSeparateCAndWithCAliasingD) {
  const int m = 4, n = 6, k = 5;
  const auto a = Random(m * k, 3), b = Random(k * n, 4), c = Random(m * n, 5);
  float *da = Upload(a), *db = Upload(b), *dc = Upload(c), *dd = Upload(std::vector<float>(m * n));
  const Mat cm{c.data(), m};
  const auto want = RefGemm(false, false, m, n, k, 0.5, {a.data(), m}, {b.data(), k}, -2.0, &cm, 0);
  LtCall call;
  call.m = m, call.n = n, call.k = k, call.alpha = 0.5f, call.beta = -2.0f;
  call.a = da, call.lda = m, call.b = db, call.ldb = k, call.c = dc, call.ldc = m, call.d = dd,
  call.ldd = m;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  ExpectClose(want, Download(dd, m * n), m, n, m, 1e-5, "C separate");
  EXPECT_EQ(Download(dc, m * n), c) << "C must not be written";
  call.d = dc;  // In place: D = C.
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  ExpectClose(want, Download(dc, m * n), m, n, m, 1e-5, "C aliasing D");
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
}

TEST_F(CublasLtEmuTest, StridedBatchesIncludingABroadcastOperand) {
  const int m = 3, n = 4, k = 6, batch = 3;
  const long long sa = m * k + 5, sd = m * n + 2;              // Gaps between batches.
  const auto a = Random(sa * batch, 6), b = Random(k * n, 7);  // B shared: stride 0.
  float *da = Upload(a), *db = Upload(b), *dd = Upload(std::vector<float>(sd * batch, 0.0f));
  LtCall call;
  call.tb = true;  // B stored n x k.
  call.m = m, call.n = n, call.k = k, call.batch = batch;
  call.a = da, call.lda = m, call.stride_a = sa, call.b = db, call.ldb = n, call.stride_b = 0;
  call.c = dd, call.ldc = m, call.stride_c = sd, call.d = dd, call.ldd = m, call.stride_d = sd;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  const auto got = Download(dd, sd * batch);
  for (int bt = 0; bt < batch; ++bt) {
    const auto want =
        RefGemm(false, true, m, n, k, 1, {a.data(), m, sa}, {b.data(), n, 0}, 0, nullptr, bt);
    ExpectClose(want, got, m, n, m, 1e-5, "batch " + std::to_string(bt), bt * sd);
  }
  cudaFree(da), cudaFree(db), cudaFree(dd);
}

// The GEMM the GELU epilogues share: Z = op(A)·op(B) + bias broadcast along columns.
struct BiasCase {
  int m = 6, n = 5, k = 4;
  std::vector<float> a = Random(6 * 4, 11), b = Random(4 * 5, 12), bias = Random(6, 13);
  std::vector<double> Z() const {
    auto z = RefGemm(false, false, m, n, k, 1, {a.data(), m}, {b.data(), k}, 0, nullptr, 0);
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) z[i + j * m] += 3.0 * bias[i];  // Scaled into GELU's bend.
    }
    return z;
  }
};

TEST_F(CublasLtEmuTest, BiasAndGeluEpilogues) {
  BiasCase bc;
  std::vector<float> bias3(bc.bias);
  for (float& x : bias3) x *= 3;
  float *da = Upload(bc.a), *db = Upload(bc.b), *dbias = Upload(bias3);
  float* dd = Upload(std::vector<float>(bc.m * bc.n));
  LtCall call;
  call.m = bc.m, call.n = bc.n, call.k = bc.k, call.a = da, call.lda = bc.m, call.b = db,
  call.ldb = bc.k, call.c = dd, call.ldc = bc.m, call.d = dd, call.ldd = bc.m, call.bias = dbias;
  const auto z = bc.Z();
  auto apply = [&](double (*f)(double)) {
    std::vector<double> r(z.size());
    for (size_t i = 0; i < z.size(); ++i) r[i] = f(z[i]);
    return r;
  };
  call.epilogue = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  ExpectClose(z, Download(dd, z.size()), bc.m, bc.n, bc.m, 1e-5, "BIAS");
  call.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  ExpectClose(apply(GeluTanhRef), Download(dd, z.size()), bc.m, bc.n, bc.m, 1e-5, "GELU_BIAS tanh");
  setenv("CUDA_EMU_CUBLASLT_GELU", "erf", 1);
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  const auto erf_got = Download(dd, z.size());
  ExpectClose(apply(GeluErfRef), erf_got, bc.m, bc.n, bc.m, 1e-5, "GELU_BIAS erf");
  // The two forms differ measurably on these inputs, so the option does select.
  double max_diff = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(GeluTanhRef(z[i]) - erf_got[i]));
  }
  EXPECT_GT(max_diff, 1e-5);
  unsetenv("CUDA_EMU_CUBLASLT_GELU");
  call.epilogue = CUBLASLT_EPILOGUE_GELU;  // No bias.
  call.bias = nullptr;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  const auto plain = RefGemm(false, false, bc.m, bc.n, bc.k, 1, {bc.a.data(), bc.m},
                             {bc.b.data(), bc.k}, 0, nullptr, 0);
  std::vector<double> gelu_plain(plain.size());
  for (size_t i = 0; i < plain.size(); ++i) gelu_plain[i] = GeluTanhRef(plain[i]);
  ExpectClose(gelu_plain, Download(dd, z.size()), bc.m, bc.n, bc.m, 1e-5, "GELU");
  cudaFree(da), cudaFree(db), cudaFree(dbias), cudaFree(dd);
}

// Forward GELU_AUX_BIAS stores the GELU input; backward DGELU multiplies a gradient GEMM by
// GELU'(aux), checked against a central difference of GELU; DGELU_BGRAD also sums each row.
TEST_F(CublasLtEmuTest, GeluAuxThenDGeluRoundTripAndBiasGradient) {
  BiasCase bc;
  std::vector<float> bias3(bc.bias);
  for (float& x : bias3) x *= 3;
  const int ld_aux = 8;  // cuBLASLt wants a multiple of 8, >= m.
  float *da = Upload(bc.a), *db = Upload(bc.b), *dbias = Upload(bias3);
  float* dd = Upload(std::vector<float>(bc.m * bc.n));
  float* daux = Upload(std::vector<float>(ld_aux * bc.n, -7.0f));
  LtCall fwd;
  fwd.m = bc.m, fwd.n = bc.n, fwd.k = bc.k, fwd.a = da, fwd.lda = bc.m, fwd.b = db, fwd.ldb = bc.k,
  fwd.c = dd, fwd.ldc = bc.m, fwd.d = dd, fwd.ldd = bc.m, fwd.bias = dbias;
  fwd.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, fwd.aux = daux, fwd.aux_ld = ld_aux;
  ASSERT_EQ(fwd.Run(h_), CUBLAS_STATUS_SUCCESS);
  const auto z = bc.Z();
  const auto aux = Download(daux, ld_aux * bc.n);
  ExpectClose(z, aux, bc.m, bc.n, ld_aux, 1e-5, "aux holds the GELU input");
  for (int j = 0; j < bc.n; ++j) {
    for (int i = bc.m; i < ld_aux; ++i) EXPECT_EQ(aux[i + j * ld_aux], -7.0f) << "aux padding";
  }
  // Backward: G = op(P)·op(Q) (m x n) times GELU'(z).
  const int kk = 3;
  const auto p = Random(bc.m * kk, 21), q = Random(kk * bc.n, 22);
  float *dp = Upload(p), *dq = Upload(q), *dg = Upload(std::vector<float>(bc.m * bc.n));
  float* dbgrad = Upload(std::vector<float>(bc.m, 0.0f));
  LtCall bwd;
  bwd.m = bc.m, bwd.n = bc.n, bwd.k = kk, bwd.a = dp, bwd.lda = bc.m, bwd.b = dq, bwd.ldb = kk,
  bwd.c = dg, bwd.ldc = bc.m, bwd.d = dg, bwd.ldd = bc.m, bwd.aux = daux, bwd.aux_ld = ld_aux;
  bwd.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD, bwd.bias = dbgrad;
  ASSERT_EQ(bwd.Run(h_), CUBLAS_STATUS_SUCCESS);
  auto want =
      RefGemm(false, false, bc.m, bc.n, kk, 1, {p.data(), bc.m}, {q.data(), kk}, 0, nullptr, 0);
  std::vector<double> row_sum(bc.m, 0.0);
  for (int j = 0; j < bc.n; ++j) {
    for (int i = 0; i < bc.m; ++i) {
      const double x = z[i + j * bc.m], h = 1e-4;
      want[i + j * bc.m] *= (GeluTanhRef(x + h) - GeluTanhRef(x - h)) / (2 * h);
      row_sum[i] += want[i + j * bc.m];
    }
  }
  ExpectClose(want, Download(dg, bc.m * bc.n), bc.m, bc.n, bc.m, 1e-4, "DGELU");
  ExpectClose(row_sum, Download(dbgrad, bc.m), bc.m, 1, bc.m, 1e-4, "DGELU_BGRAD bias gradient");
  bwd.epilogue = CUBLASLT_EPILOGUE_DGELU, bwd.bias = nullptr;
  ASSERT_EQ(bwd.Run(h_), CUBLAS_STATUS_SUCCESS);
  ExpectClose(want, Download(dg, bc.m * bc.n), bc.m, bc.n, bc.m, 1e-4, "DGELU");
  for (float* x : {da, db, dbias, dd, daux, dp, dq, dg, dbgrad}) cudaFree(x);
}

// BGRADA: bias[i] = sum over k of op(A)(i, :) (m values); BGRADB: bias[j] = sum over k of
// op(B)(:, j) (n values). D is the plain product.
TEST_F(CublasLtEmuTest, BGradAAndBGradBSumOverK) {
  const int m = 4, n = 3, k = 5;
  for (bool trans : {false, true}) {
    const auto a = Random(m * k, 31), b = Random(k * n, 32);
    float *da = Upload(a), *db = Upload(b), *dd = Upload(std::vector<float>(m * n));
    float* dbias = Upload(std::vector<float>(std::max(m, n), 0.0f));
    const int lda = trans ? k : m, ldb = trans ? n : k;
    LtCall call;
    call.ta = trans, call.tb = trans, call.m = m, call.n = n, call.k = k, call.a = da,
    call.lda = lda, call.b = db, call.ldb = ldb, call.c = dd, call.ldc = m, call.d = dd,
    call.ldd = m, call.bias = dbias;
    const Mat am{a.data(), lda}, bm{b.data(), ldb};
    call.epilogue = CUBLASLT_EPILOGUE_BGRADA;
    ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
    std::vector<double> want_a(m, 0.0), want_b(n, 0.0);
    for (int i = 0; i < m; ++i) {
      for (int p = 0; p < k; ++p) want_a[i] += OpAt(am, trans, i, p, 0);
    }
    for (int j = 0; j < n; ++j) {
      for (int p = 0; p < k; ++p) want_b[j] += OpAt(bm, trans, p, j, 0);
    }
    ExpectClose(want_a, Download(dbias, m), m, 1, m, 1e-5, "BGRADA");
    ExpectClose(RefGemm(trans, trans, m, n, k, 1, am, bm, 0, nullptr, 0), Download(dd, m * n), m, n,
                m, 1e-5, "D with BGRADA");
    call.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
    ExpectClose(want_b, Download(dbias, n), n, 1, n, 1e-5, "BGRADB");
    cudaFree(da), cudaFree(db), cudaFree(dd), cudaFree(dbias);
  }
}

template <typename T>
void HalfTypeCase(cublasLtHandle_t h, cudaDataType_t type, T (*from)(float), float (*to)(T),
                  double out_tol) {
  const int m = 6, n = 5, k = 7;
  const auto af = Random(m * k, 41), bf = Random(k * n, 42);
  std::vector<T> a(af.size()), b(bf.size());
  std::vector<float> ar(af.size()), br(bf.size());  // The rounded inputs, for the reference.
  for (size_t i = 0; i < af.size(); ++i) ar[i] = to(a[i] = from(af[i]));
  for (size_t i = 0; i < bf.size(); ++i) br[i] = to(b[i] = from(bf[i]));
  const auto want =
      RefGemm(false, false, m, n, k, 1, {ar.data(), m}, {br.data(), k}, 0, nullptr, 0);
  T *da = Upload(a), *db = Upload(b);
  float* d32 = Upload(std::vector<float>(m * n));
  LtCall call;
  call.m = m, call.n = n, call.k = k, call.a = da, call.a_type = type, call.lda = m, call.b = db,
  call.b_type = type, call.ldb = k, call.c = d32, call.ldc = m, call.d = d32, call.ldd = m;
  ASSERT_EQ(call.Run(h), CUBLAS_STATUS_SUCCESS);
  ExpectClose(want, Download(d32, m * n), m, n, m, 1e-5, "fp32 output");
  T* d16 = Upload(std::vector<T>(m * n));
  call.c = d16, call.c_type = type, call.d = d16, call.d_type = type;
  ASSERT_EQ(call.Run(h), CUBLAS_STATUS_SUCCESS);
  const auto got16 = Download(d16, m * n);
  std::vector<float> got(got16.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = to(got16[i]);
  ExpectClose(want, got, m, n, m, out_tol, "16-bit output");
  cudaFree(da), cudaFree(db), cudaFree(d32), cudaFree(d16);
}

TEST_F(CublasLtEmuTest, Bf16AndFp16InputsAccumulateInFp32) {
  HalfTypeCase<__nv_bfloat16>(
      h_, CUDA_R_16BF, [](float x) { return __float2bfloat16_rn(x); },
      [](__nv_bfloat16 x) { return __bfloat162float(x); }, 1.0 / 256);
  HalfTypeCase<__half>(
      h_, CUDA_R_16F, [](float x) { return __float2half_rn(x); },
      [](__half x) { return __half2float(x); }, 1.0 / 2048);
}

// 1 + 2^-12 has no TF32 form (10 mantissa bits): TF32 mode rounds it to 1, fp32 keeps it;
// 1 + 3·2^-12 rounds up to 1 + 2^-10.
TEST_F(CublasLtEmuTest, Tf32ComputeRoundsInputsToTenMantissaBits) {
  const float small = 1.0f + std::ldexp(1.0f, -12), up = 1.0f + 3 * std::ldexp(1.0f, -12);
  float *da = Upload(std::vector<float>{small, up}), *db = Upload(std::vector<float>{1.0f});
  float* dd = Upload(std::vector<float>(2));
  LtCall call;
  call.m = 2, call.n = 1, call.k = 1, call.a = da, call.lda = 2, call.b = db, call.ldb = 1,
  call.c = dd, call.ldc = 2, call.d = dd, call.ldd = 2;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Download(dd, 2), (std::vector<float>{small, up}));
  call.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Download(dd, 2), (std::vector<float>{1.0f, 1.0f + std::ldexp(1.0f, -10)}));
  cudaFree(da), cudaFree(db), cudaFree(dd);
}

TEST_F(CublasLtEmuTest, RefusesUnsupportedConfigurationsLoudly) {
  cublasLtMatmulDesc_t desc;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_16F, CUDA_R_16F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const uint32_t relu = CUBLASLT_EPILOGUE_RELU;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const int32_t op_c = CUBLAS_OP_C;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_c, sizeof op_c),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const int64_t stride = 4;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &stride,
                                           sizeof stride),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulDescDestroy(desc);
  cublasLtMatrixLayout_t l;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  const int32_t row = CUBLASLT_ORDER_ROW;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayoutDestroy(l);
  // fp32 inputs with a bf16 output: a combination cuBLASLt does not offer either.
  float *da = Upload(std::vector<float>(4)), *db = Upload(std::vector<float>(4));
  void* dd = Upload(std::vector<__nv_bfloat16>(4));
  LtCall call;
  call.m = 2, call.n = 2, call.k = 2, call.a = da, call.lda = 2, call.b = db, call.ldb = 2,
  call.c = dd, call.c_type = CUDA_R_16BF, call.ldc = 2, call.d = dd, call.d_type = CUDA_R_16BF,
  call.ldd = 2;
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_NOT_SUPPORTED);
  // Mixed-precision combinations cuBLASLt does not offer: A and B of different 16-bit types,
  // and TF32 compute with 16-bit inputs. bf16 A and B with fp32 C/D under COMPUTE_32F run.
  void* h16 = Upload(std::vector<__nv_bfloat16>(4));
  void* f16 = Upload(std::vector<__half>(4));
  float* d32 = Upload(std::vector<float>(4));
  call.a = h16, call.a_type = CUDA_R_16BF, call.b = f16, call.b_type = CUDA_R_16F;
  call.c = d32, call.c_type = CUDA_R_32F, call.d = d32, call.d_type = CUDA_R_32F;
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_NOT_SUPPORTED);
  call.b = h16, call.b_type = CUDA_R_16BF, call.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_NOT_SUPPORTED);
  call.compute = CUBLAS_COMPUTE_32F;
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  cudaFree(da), cudaFree(db), cudaFree(dd), cudaFree(h16), cudaFree(f16), cudaFree(d32);
}

TEST_F(CublasLtEmuTest, RefusesOperandsOutsideTheirAllocation) {
  const int m = 4, n = 4, k = 4, batch = 2;
  float *da = Upload(std::vector<float>(m * k * batch)), *db = Upload(std::vector<float>(k * n));
  float* dd = Upload(std::vector<float>(m * n * batch));
  LtCall call;
  call.m = m, call.n = n, call.k = k, call.batch = batch, call.a = da, call.lda = m,
  call.stride_a = m * k, call.b = db, call.ldb = k, call.c = dd, call.ldc = m,
  call.stride_c = m * n, call.d = dd, call.ldd = m, call.stride_d = m * n;
  ASSERT_EQ(call.Run(h_), CUBLAS_STATUS_SUCCESS);
  call.stride_a = m * k + 1;  // The second batch of A runs one element past its allocation.
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_INVALID_VALUE);
  call.stride_a = m * k;
  call.ldb = k + 1;  // B's last column runs past its allocation.
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_INVALID_VALUE);
  call.ldb = k;
  std::vector<float> host(m * k * batch);  // Not device memory at all.
  call.a = host.data();
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_INVALID_VALUE);
  call.a = da;
  call.ldd = m - 1;  // ld below the row count.
  EXPECT_EQ(call.Run(h_), CUBLAS_STATUS_INVALID_VALUE);
  cudaFree(da), cudaFree(db), cudaFree(dd);
}

// ---- cuBLAS v2 -----------------------------------------------------------------------------

TEST(CublasEmuTest, SgemmEveryTransposeAndAlphaBeta) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(h, stream), CUBLAS_STATUS_SUCCESS);
  const int m = 3, n = 5, k = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 1;
      const auto a = Random(lda * (ta ? m : k), 51), b = Random(ldb * (tb ? k : n), 52);
      const auto c = Random(ldc * n, 53);
      float *da = Upload(a), *db = Upload(b), *dc = Upload(c);
      const float alpha = -0.75f, beta = 0.25f;
      ASSERT_EQ(cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n,
                            k, &alpha, da, lda, db, ldb, &beta, dc, ldc),
                CUBLAS_STATUS_SUCCESS);
      const Mat cm{c.data(), ldc};
      ExpectClose(RefGemm(ta, tb, m, n, k, alpha, {a.data(), lda}, {b.data(), ldb}, beta, &cm, 0),
                  Download(dc, c.size()), m, n, ldc, 1e-5, "cublasSgemm");
      cudaFree(da), cudaFree(db), cudaFree(dc);
    }
  }
  cudaStreamDestroy(stream);
  cublasDestroy(h);
}

TEST(CublasEmuTest, GemmExAndStridedBatchedVariants) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const int m = 4, n = 3, k = 5, batch = 2;
  const auto af = Random(m * k * batch, 61), bf = Random(k * n * batch, 62);
  std::vector<__nv_bfloat16> a(af.size()), b(bf.size());
  std::vector<float> ar(af.size()), br(bf.size());
  for (size_t i = 0; i < af.size(); ++i)
    ar[i] = __bfloat162float(a[i] = __float2bfloat16_rn(af[i]));
  for (size_t i = 0; i < bf.size(); ++i)
    br[i] = __bfloat162float(b[i] = __float2bfloat16_rn(bf[i]));
  __nv_bfloat16 *da = Upload(a), *db = Upload(b);
  float* dc = Upload(std::vector<float>(m * n * batch));
  const float one = 1, zero = 0;
  ASSERT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16BF, m, db, CUDA_R_16BF,
                   k, &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  ExpectClose(RefGemm(false, false, m, n, k, 1, {ar.data(), m}, {br.data(), k}, 0, nullptr, 0),
              Download(dc, m * n), m, n, m, 1e-5, "cublasGemmEx bf16");
  ASSERT_EQ(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16BF,
                                       m, m * k, db, CUDA_R_16BF, k, k * n, &zero, dc, CUDA_R_32F,
                                       m, m * n, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto got = Download(dc, m * n * batch);
  for (int bt = 0; bt < batch; ++bt) {
    ExpectClose(RefGemm(false, false, m, n, k, 1, {ar.data(), m, m * k}, {br.data(), k, k * n}, 0,
                        nullptr, bt),
                got, m, n, m, 1e-5, "cublasGemmStridedBatchedEx batch " + std::to_string(bt),
                bt * m * n);
  }
  float *fa = Upload(af), *fb = Upload(bf);
  ASSERT_EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, fa, k, m * k, fb,
                                      k, k * n, &zero, dc, m, m * n, batch),
            CUBLAS_STATUS_SUCCESS);
  const auto got32 = Download(dc, m * n * batch);
  for (int bt = 0; bt < batch; ++bt) {
    ExpectClose(RefGemm(true, false, m, n, k, 1, {af.data(), k, m * k}, {bf.data(), k, k * n}, 0,
                        nullptr, bt),
                got32, m, n, m, 1e-5, "cublasSgemmStridedBatched batch " + std::to_string(bt),
                bt * m * n);
  }
  EXPECT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16BF, m, db, CUDA_R_16BF,
                   k, &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_NOT_SUPPORTED);
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(fa), static_cast<void*>(fb)}) {
    cudaFree(p);
  }
  cublasDestroy(h);
}

TEST(CublasEmuTest, Tf32MathModeRoundsFp32Inputs) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float x = 1.0f + std::ldexp(1.0f, -12);
  float *da = Upload(std::vector<float>{x}), *db = Upload(std::vector<float>{1.0f});
  float* dc = Upload(std::vector<float>{0.0f});
  const float one = 1, zero = 0;
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, 1, db, 1, &zero, dc, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Download(dc, 1)[0], x);
  ASSERT_EQ(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, 1, db, 1, &zero, dc, 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Download(dc, 1)[0], 1.0f);
  cudaFree(da), cudaFree(db), cudaFree(dc);
  cublasDestroy(h);
}

}  // namespace
