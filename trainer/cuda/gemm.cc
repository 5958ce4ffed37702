#include "trainer/cuda/gemm.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"

namespace ringmaster::trainer::cuda {

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

// A column-major layout of `rows` × `cols` with leading dimension `ld`, batched.
absl::Status MakeLayout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows,
                        int64_t cols, int64_t ld, int batch, int64_t stride) {
  RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(layout, type, rows, cols, ld));
  if (batch > 1) {
    const int32_t count = batch;
    RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return absl::OkStatus();
}

std::string Describe(const GemmProblem& p) {
  return absl::StrFormat("GEMM M=%d N=%d K=%d batch=%d (lda=%d%s ldb=%d%s ldc=%d)", p.M, p.N, p.K,
                         p.batch, p.a.ld, p.a.transpose ? " T" : "", p.b.ld,
                         p.b.transpose ? " T" : "", p.ldc);
}

// Row-major (rows, cols) stored with leading dimension ld needs ld >= cols.
bool LdOk(int64_t ld, int64_t cols) { return ld >= (cols > 0 ? cols : 1); }

}  // namespace

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::Create(bool tf32, size_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  g->tf32_ = tf32;
  RM_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&g->handle_));
  if (workspace_bytes > 0) {
    RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&g->workspace_, workspace_bytes));
    g->workspace_bytes_ = workspace_bytes;
  }
  return g;
}

Gemm::~Gemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<Gemm::Plan*> Gemm::PlanFor(const Key& k) {
  auto it = plans_.find(k);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  const bool fp32_operands = k.a_type == CUDA_R_32F && k.b_type == CUDA_R_32F;
  const cublasComputeType_t compute =
      tf32_ && fp32_operands ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));
  // Column-major view (see gemm.h): A' = B, B' = A, D' = Cᵀ of shape (N, M).
  const cublasOperation_t ta = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  RM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &tb, sizeof(tb)));
  RM_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof(ta)));
  if (k.has_bias) {  // the bias has D's type
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    // Stated rather than defaulted: with 16-bit A and B the bias stays fp32 like C.
    const int32_t bias_type = k.c_type;
    RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  // m' = N, n' = M, k' = K.
  RM_RETURN_IF_ERROR(MakeLayout(&plan->a, static_cast<cudaDataType_t>(k.b_type), k.tb ? k.k : k.n,
                                k.tb ? k.n : k.k, k.ldb, k.batch, k.sb));
  RM_RETURN_IF_ERROR(MakeLayout(&plan->b, static_cast<cudaDataType_t>(k.a_type), k.ta ? k.m : k.k,
                                k.ta ? k.k : k.m, k.lda, k.batch, k.sa));
  RM_RETURN_IF_ERROR(
      MakeLayout(&plan->c, static_cast<cudaDataType_t>(k.c_type), k.n, k.m, k.ldc, k.batch, k.sc));

  cublasLtMatmulPreference_t pref = nullptr;
  RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                        pref, 1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  RM_CUBLAS_RETURN_IF_ERROR(st);
  if (found == 0) {
    return absl::UnimplementedError(absl::StrFormat(
        "cuBLASLt has no algorithm for M=%d N=%d K=%d batch=%d (types A %d, B %d, C %d)", k.m, k.n,
        k.k, k.batch, k.a_type, k.b_type, k.c_type));
  }
  plan->algo = result.algo;
  Plan* raw = plan.get();
  plans_.emplace(k, std::move(plan));
  return raw;
}

absl::Status Gemm::Run(const GemmProblem& p, cudaStream_t stream) {
  const int64_t a_cols = p.a.transpose ? p.M : p.K;  // stored A is (M, K) or (K, M)
  const int64_t b_cols = p.b.transpose ? p.K : p.N;
  if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 1 || !LdOk(p.a.ld, a_cols) ||
      !LdOk(p.b.ld, b_cols) || !LdOk(p.ldc, p.N)) {
    return absl::InvalidArgumentError("bad shape: " + Describe(p));
  }
  if (p.M == 0 || p.N == 0) return absl::OkStatus();
  const Key key{p.M,
                p.N,
                p.K,
                p.a.ld,
                p.b.ld,
                p.ldc,
                p.a.batch_stride,
                p.b.batch_stride,
                p.c_batch_stride,
                p.batch,
                p.a.transpose,
                p.b.transpose,
                p.a.type,
                p.b.type,
                p.c_type,
                p.bias != nullptr};
  absl::StatusOr<Plan*> plan = PlanFor(key);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(plan.status().message(), " in ", Describe(p)));
  }
  if (p.bias != nullptr) {
    RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        (*plan)->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
  }
  RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      handle_, (*plan)->desc, &p.alpha, p.b.ptr, (*plan)->a, p.a.ptr, (*plan)->b, &p.beta, p.c,
      (*plan)->c, p.c, (*plan)->c, &(*plan)->algo, workspace_, workspace_bytes_, stream));
  return absl::OkStatus();
}

GemmProblem Gemm::LinearForwardProblem(const void* x, const void* w, cudaDataType_t type,
                                       const float* b, float* y, int64_t rows, int64_t in,
                                       int64_t out) {
  GemmProblem p;
  p.M = rows, p.N = out, p.K = in;
  p.a = {x, type, false, in, 0};
  p.b = {w, type, true, in, 0};  // W (out, in) used as Wᵀ (in, out)
  p.c = y, p.ldc = out, p.bias = b;
  return p;
}

GemmProblem Gemm::LinearInputGradProblem(const void* dy, const void* w, cudaDataType_t type,
                                         float* dx, int64_t rows, int64_t in, int64_t out,
                                         bool accumulate) {
  GemmProblem p;
  p.M = rows, p.N = in, p.K = out;
  p.a = {dy, type, false, out, 0};
  p.b = {w, type, false, in, 0};
  p.c = dx, p.ldc = in, p.beta = accumulate ? 1.0f : 0.0f;
  return p;
}

GemmProblem Gemm::LinearWeightGradProblem(const void* dy, const void* x, cudaDataType_t type,
                                          float* dw, int64_t rows, int64_t in, int64_t out) {
  GemmProblem p;
  p.M = out, p.N = in, p.K = rows;
  p.a = {dy, type, true, out, 0};  // dy (rows, out) used as dyᵀ (out, rows)
  p.b = {x, type, false, in, 0};
  p.c = dw, p.ldc = in, p.beta = 1.0f;
  return p;
}

absl::Status Gemm::LinearForward(const float* x, const float* w, const float* b, float* y,
                                 int64_t rows, int64_t in, int64_t out, cudaStream_t stream) {
  return Run(LinearForwardProblem(x, w, CUDA_R_32F, b, y, rows, in, out), stream);
}

absl::Status Gemm::LinearInputGrad(const float* dy, const float* w, float* dx, int64_t rows,
                                   int64_t in, int64_t out, bool accumulate, cudaStream_t stream) {
  return Run(LinearInputGradProblem(dy, w, CUDA_R_32F, dx, rows, in, out, accumulate), stream);
}

absl::Status Gemm::LinearWeightGrad(const float* dy, const float* x, float* dw, int64_t rows,
                                    int64_t in, int64_t out, cudaStream_t stream) {
  return Run(LinearWeightGradProblem(dy, x, CUDA_R_32F, dw, rows, in, out), stream);
}

}  // namespace ringmaster::trainer::cuda
