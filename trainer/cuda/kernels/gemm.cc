#include "trainer/cuda/kernels/gemm.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/gemm_fallback.h"

namespace ringmaster::trainer::cuda {

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;  // the heuristic's candidates, best first
  size_t next = 0;                          // the candidate tried first: the one that last worked
  bool plain = false;  // cuBLASLt offered none or refused them all: the plain fp32 kernel
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

// `s` with the problem appended, so an error deep in a step names the GEMM that failed.
absl::Status WithShape(const absl::Status& s, const GemmProblem& p) {
  return absl::Status(s.code(), absl::StrCat(s.message(), " in ", Describe(p)));
}

size_t ElementBytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// The largest power of two <= 16 dividing the address of every batch of an operand: what
// cuBLASLt's vectorised loads care about (16 bytes is its widest), and the plan key's part that
// makes a 4-byte-aligned view of a buffer get its own plan and algorithms.
int Alignment(const void* ptr, int64_t batch_stride, cudaDataType_t type, int batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr);
  if (batch > 1) bits |= static_cast<uint64_t>(batch_stride) * ElementBytes(type);
  int a = 1;
  while (a < 16 && (bits & static_cast<uint64_t>(a)) == 0) a <<= 1;
  return a;
}

// What the plain kernel (gemm_fallback.h) computes: fp32 C (and bias), A and B of one type.
bool PlainSupports(int a_type, int b_type, int c_type) {
  return c_type == CUDA_R_32F && a_type == b_type &&
         (a_type == CUDA_R_32F || a_type == CUDA_R_16BF || a_type == CUDA_R_16F);
}

// cublasLtMatmul statuses that refuse the candidate, not the call: the next one may run.
// INVALID_VALUE is not among them (it means bad pointers or shapes, which no algorithm fixes).
bool CandidateRefused(cublasStatus_t st) {
  return st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH;
}

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
  // cuBLASLt's A is our B and its B our A (the column-major view); C and D are our C. Without
  // these, the heuristic assumes 256-byte-aligned operands and may pick an algorithm that
  // refuses a 4-byte-aligned view (a hidden size not a multiple of 4 floats) at run time.
  const uint32_t align[4] = {static_cast<uint32_t>(k.align_b), static_cast<uint32_t>(k.align_a),
                             static_cast<uint32_t>(k.align_c), static_cast<uint32_t>(k.align_c)};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i]));
  }
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                        pref, kCandidates, results, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED here is cuBLASLt's "no algorithm": the plain kernel computes the product.
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) RM_CUBLAS_RETURN_IF_ERROR(st);
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found && i < kCandidates; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) plan->algos.push_back(results[i].algo);
  }
  if (plan->algos.empty()) {
    const std::string what = absl::StrFormat(
        "cuBLASLt has no algorithm for GEMM M=%d N=%d K=%d batch=%d (types A %d, B %d, C %d, "
        "alignment A %d B %d C %d bytes)",
        k.m, k.n, k.k, k.batch, k.a_type, k.b_type, k.c_type, k.align_a, k.align_b, k.align_c);
    if (!PlainSupports(k.a_type, k.b_type, k.c_type)) {
      return absl::UnimplementedError(absl::StrCat(
          what, ", and the plain kernel needs fp32 C and A, B of one type (fp32, bf16, fp16)"));
    }
    plan->plain = true;
    LogWarning(absl::StrCat(what, ": the plain fp32 kernel computes it"));
  }
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
                p.bias != nullptr,
                Alignment(p.a.ptr, p.a.batch_stride, p.a.type, p.batch),
                Alignment(p.b.ptr, p.b.batch_stride, p.b.type, p.batch),
                Alignment(p.c, p.c_batch_stride, p.c_type, p.batch)};
  absl::StatusOr<Plan*> found = PlanFor(key);
  if (!found.ok()) return WithShape(found.status(), p);
  Plan* plan = *found;
  if (plan->plain) return RunPlain(p, stream);
  if (p.bias != nullptr) {
    const absl::Status s = [&]() -> absl::Status {
      RM_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
          plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)));
      return absl::OkStatus();
    }();
    if (!s.ok()) return WithShape(s, p);
  }
  // The candidate that worked last time first; one refused at run time (an algorithm the
  // heuristic offered but the call's pointers or this device cannot run) gives way to the next.
  std::string refusals;
  for (; plan->next < plan->algos.size(); ++plan->next) {
    const cublasStatus_t st = cublasLtMatmul(
        handle_, plan->desc, &p.alpha, p.b.ptr, plan->a, p.a.ptr, plan->b, &p.beta, p.c, plan->c,
        p.c, plan->c, &plan->algos[plan->next], workspace_, workspace_bytes_, stream);
    if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
    const absl::Status s = CublasStatus(st, "cublasLtMatmul", __FILE__, __LINE__);
    if (!CandidateRefused(st)) return WithShape(s, p);
    ++stats_.refused_candidates;
    absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", "candidate ", plan->next, ": ",
                    cublasLtGetStatusString(st));
  }
  const std::string what = absl::StrCat("cuBLASLt refused all ", plan->algos.size(),
                                        " candidates (", refusals, ") for ", Describe(p));
  if (!PlainSupports(p.a.type, p.b.type, p.c_type)) {
    plan->next = 0;  // the next call tries them again
    return absl::UnimplementedError(absl::StrCat(
        what, ", and the plain kernel needs fp32 C and A, B of one type (fp32, bf16, fp16)"));
  }
  plan->plain = true;
  LogWarning(absl::StrCat(what, ": the plain fp32 kernel computes it"));
  return RunPlain(p, stream);
}

absl::Status Gemm::RunPlain(const GemmProblem& p, cudaStream_t stream) {
  PlainGemmArgs a;
  a.M = p.M, a.N = p.N, a.K = p.K, a.batch = p.batch;
  a.a = p.a.ptr, a.b = p.b.ptr, a.type = p.a.type;
  a.ta = p.a.transpose, a.tb = p.b.transpose;
  a.lda = p.a.ld, a.ldb = p.b.ld, a.sa = p.a.batch_stride, a.sb = p.b.batch_stride;
  a.c = static_cast<float*>(p.c), a.ldc = p.ldc, a.sc = p.c_batch_stride;
  a.alpha = p.alpha, a.beta = p.beta;
  a.bias = static_cast<const float*>(p.bias);
  const cudaError_t e = PlainGemm(a, stream);
  if (e != cudaSuccess) return WithShape(CudaStatus(e, "PlainGemm", __FILE__, __LINE__), p);
  ++stats_.plain_runs;
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
