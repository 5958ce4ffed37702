// The cuBLASLt stand-in: the real <cublasLt.h> declares these functions; this file defines the
// subset a BERT trainer uses, on top of emu_gemm.h, and refuses every other attribute, type or
// epilogue with CUBLAS_STATUS_NOT_SUPPORTED and a line on stderr saying what was asked. Tests
// can make it refuse chosen heuristic candidates or misaligned operands (cublaslt_emu_control.h).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cuda_emu/census.h"
#include "cuda_emu/cublaslt_emu_control.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/emu_gemm.h"
#include "cuda_emu/streams.h"

namespace {

using cuda_emu::blas::Epilogue;

struct LtHandle {
  int magic = 0x4c74;
};

struct MatmulDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int32_t trans_a = CUBLAS_OP_N;
  int32_t trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type, as in cuBLASLt.
  const void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = -1;  // -1: D's type.
};

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint64_t max_workspace = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D; cuBLASLt's default is 256
};

// What the stand-in writes into cublasLtMatmulAlgo_t::data: a marker, the candidate's index and
// the alignment (bytes) it needs of A, B, C and D.
constexpr uint64_t kAlgoMarker = 0x656d75;  // "emu"
struct AlgoInfo {
  int index = 0;
  uint64_t alignment[4] = {16, 16, 16, 16};
};

AlgoInfo DecodeAlgo(const cublasLtMatmulAlgo_t* algo) {
  AlgoInfo info;
  if (algo == nullptr || algo->data[0] != kAlgoMarker) return info;  // null: cuBLASLt's own pick
  info.index = static_cast<int>(algo->data[1]);
  for (int i = 0; i < 4; ++i) info.alignment[i] = algo->data[2 + i];
  return info;
}

// The largest power of two <= 256 dividing the address of every batch of `o`.
uint64_t Alignment(const cuda_emu::blas::Operand& o, int64_t batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(o.ptr);
  if (batch > 1) bits |= static_cast<uint64_t>(o.stride) * cuda_emu::blas::ElementBytes(o.type);
  uint64_t a = 1;
  while (a < 256 && (bits & a) == 0) a <<= 1;
  return a;
}

bool ShapeSelected(const cuda_emu::blas::LtRefusals& r, const cuda_emu::blas::GemmSpec& s) {
  return (r.only_m < 0 || r.only_m == s.m) && (r.only_n < 0 || r.only_n == s.n) &&
         (r.only_k < 0 || r.only_k == s.k);
}

cublasStatus_t Refuse(cublasStatus_t st, const std::string& what) {
  std::fprintf(stderr, "cuda_emu cuBLASLt stand-in: %s\n", what.c_str());
  return st;
}

// Copies an attribute of exactly sizeof(T) bytes, as cuBLASLt requires.
template <typename T>
cublasStatus_t Read(const char* attr, const void* buf, size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(attr) + ": null buffer or size " +
                                                   std::to_string(size) +
                                                   " != " + std::to_string(sizeof(T)));
  }
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool ToEpilogue(uint32_t e, Epilogue* out) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
      *out = Epilogue::kDefault;
      return true;
    case CUBLASLT_EPILOGUE_BIAS:
      *out = Epilogue::kBias;
      return true;
    case CUBLASLT_EPILOGUE_GELU:
      *out = Epilogue::kGelu;
      return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      *out = Epilogue::kGeluBias;
      return true;
    case CUBLASLT_EPILOGUE_GELU_AUX:
      *out = Epilogue::kGeluAux;
      return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      *out = Epilogue::kGeluAuxBias;
      return true;
    case CUBLASLT_EPILOGUE_DGELU:
      *out = Epilogue::kDGelu;
      return true;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      *out = Epilogue::kDGeluBGrad;
      return true;
    case CUBLASLT_EPILOGUE_BGRADA:
      *out = Epilogue::kBGradA;
      return true;
    case CUBLASLT_EPILOGUE_BGRADB:
      *out = Epilogue::kBGradB;
      return true;
    default:
      return false;
  }
}

cuda_emu::blas::Operand ToOperand(const char* name, const void* p, const Layout& l) {
  return {name, p,       l.type, static_cast<int64_t>(l.rows), static_cast<int64_t>(l.cols),
          l.ld, l.stride};
}

// Builds the GemmSpec of a cublasLtMatmul call; alpha/beta may be null (heuristic query).
cublasStatus_t BuildSpec(const char* api, cublasLtMatmulDesc_t desc, const float* alpha,
                         const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                         cublasLtMatrixLayout_t Bdesc, const float* beta, const void* C,
                         cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                         cuda_emu::blas::GemmSpec* s) {
  if (desc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
      Ddesc == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(api) + ": a null descriptor");
  }
  const auto& d = *reinterpret_cast<const MatmulDesc*>(desc);
  const auto& la = *reinterpret_cast<const Layout*>(Adesc);
  const auto& lb = *reinterpret_cast<const Layout*>(Bdesc);
  const auto& lc = *reinterpret_cast<const Layout*>(Cdesc);
  const auto& ld = *reinterpret_cast<const Layout*>(Ddesc);
  s->api = api;
  s->trans_a = d.trans_a == CUBLAS_OP_T;
  s->trans_b = d.trans_b == CUBLAS_OP_T;
  s->m = static_cast<int64_t>(ld.rows);
  s->n = static_cast<int64_t>(ld.cols);
  s->k = static_cast<int64_t>(s->trans_a ? la.rows : la.cols);
  if (la.batch != ld.batch || lb.batch != ld.batch || lc.batch != ld.batch) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE,
                  std::string(api) + ": batch counts differ: A " + std::to_string(la.batch) +
                      ", B " + std::to_string(lb.batch) + ", C " + std::to_string(lc.batch) +
                      ", D " + std::to_string(ld.batch));
  }
  s->batch = ld.batch;
  s->alpha = alpha == nullptr ? 1.0f : *alpha;
  s->beta = beta == nullptr ? 1.0f : *beta;  // Heuristic: assume C is read.
  s->tf32 = d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  // TF32 is an fp32-input mode: 16-bit operands take CUBLAS_COMPUTE_32F (as in cuBLASLt's table
  // of supported type combinations).
  if (s->tf32 && (la.type != CUDA_R_32F || lb.type != CUDA_R_32F)) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  std::string(api) + ": CUBLAS_COMPUTE_32F_FAST_TF32 needs fp32 A and B (got " +
                      std::to_string(la.type) + ", " + std::to_string(lb.type) +
                      "); 16-bit inputs use CUBLAS_COMPUTE_32F");
  }
  s->a = ToOperand("A", A, la);
  s->b = ToOperand("B", B, lb);
  s->c = ToOperand("C", C, lc);
  s->d = ToOperand("D", D, ld);
  if (!ToEpilogue(d.epilogue, &s->epilogue)) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  std::string(api) + ": epilogue " + std::to_string(d.epilogue) +
                      " is not implemented (DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX, "
                      "GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADA, BGRADB are)");
  }
  s->bias = d.bias;
  s->bias_type = d.bias_type == -1 ? ld.type : static_cast<cudaDataType_t>(d.bias_type);
  s->aux = d.aux;
  s->aux_ld = d.aux_ld;
  s->aux_type = d.aux_type == -1 ? ld.type : static_cast<cudaDataType_t>(d.aux_type);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// The same names as cuBLAS's (cublas_emu.cc): both libraries use one status enum.
const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: null");
  *handle = reinterpret_cast<cublasLtHandle_t>(new LtHandle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<LtHandle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (desc == nullptr) return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: null");
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulDescCreate: compute type " + std::to_string(compute) +
                      " (only CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32F_FAST_TF32)");
  }
  if (scale != CUDA_R_32F) {
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulDescCreate: scale type " +
                                                   std::to_string(scale) + " (only CUDA_R_32F)");
  }
  auto* d = new MatmulDesc;
  d->compute = compute;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MatmulDesc*>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  if (desc == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: null descriptor");
  }
  auto* d = reinterpret_cast<MatmulDesc*>(desc);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
      int32_t op;
      const cublasStatus_t st = Read("TRANSA/TRANSB", buf, size, &op);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
      if (op != CUBLAS_OP_N && op != CUBLAS_OP_T) {
        return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "TRANSA/TRANSB " + std::to_string(op) + " (only CUBLAS_OP_N, CUBLAS_OP_T)");
      }
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->trans_a : d->trans_b) = op;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      uint32_t e;
      const cublasStatus_t st = Read("EPILOGUE", buf, size, &e);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
      Epilogue unused;
      if (!ToEpilogue(e, &unused)) {
        return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "EPILOGUE " + std::to_string(e) + " is not implemented by the stand-in");
      }
      d->epilogue = e;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return Read("BIAS_POINTER", buf, size, &d->bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return Read("BIAS_DATA_TYPE", buf, size, &d->bias_type);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return Read("EPILOGUE_AUX_POINTER", buf, size, &d->aux);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return Read("EPILOGUE_AUX_LD", buf, size, &d->aux_ld);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      return Read("EPILOGUE_AUX_DATA_TYPE", buf, size, &d->aux_type);
    default:
      return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                    "cublasLtMatmulDescSetAttribute: attribute " + std::to_string(attr) +
                        " is not implemented (TRANSA, TRANSB, EPILOGUE, BIAS_POINTER, "
                        "BIAS_DATA_TYPE, EPILOGUE_AUX_POINTER/LD/DATA_TYPE are)");
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (layout == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: null");
  }
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout*>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (layout == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutSetAttribute: null layout");
  }
  auto* l = reinterpret_cast<Layout*>(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return Read("BATCH_COUNT", buf, size, &l->batch);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return Read("STRIDED_BATCH_OFFSET", buf, size, &l->stride);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: {
      int32_t order;
      const cublasStatus_t st = Read("ORDER", buf, size, &order);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
      if (order != CUBLASLT_ORDER_COL) {
        return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "layout ORDER " + std::to_string(order) + " (only CUBLASLT_ORDER_COL)");
      }
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                    "cublasLtMatrixLayoutSetAttribute: attribute " + std::to_string(attr) +
                        " is not implemented (BATCH_COUNT, STRIDED_BATCH_OFFSET, ORDER=COL are)");
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: null");
  }
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete reinterpret_cast<Preference*>(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (pref == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceSetAttribute: null");
  }
  auto* p = reinterpret_cast<Preference*>(pref);
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return Read("MAX_WORKSPACE_BYTES", buf, size, &p->max_workspace);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return Read("MIN_ALIGNMENT_A_BYTES", buf, size, &p->min_alignment[0]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return Read("MIN_ALIGNMENT_B_BYTES", buf, size, &p->min_alignment[1]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return Read("MIN_ALIGNMENT_C_BYTES", buf, size, &p->min_alignment[2]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return Read("MIN_ALIGNMENT_D_BYTES", buf, size, &p->min_alignment[3]);
    default:
      return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                    "cublasLtMatmulPreferenceSetAttribute: attribute " + std::to_string(attr) +
                        " (only MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_{A,B,C,D}_BYTES)");
  }
}

// Up to kLtCandidates algorithms for any configuration the stand-in can run (they need no
// workspace and compute alike); the same checks as cublasLtMatmul minus the pointers, so an
// unsupported configuration fails here. Each needs every operand aligned to min(16, the
// preference's minimum alignment), which cublasLtMatmul enforces when a test asks for it.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* returned) {
  if (handle == nullptr || pref == nullptr || results == nullptr || returned == nullptr ||
      requested < 1) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "cublasLtMatmulAlgoGetHeuristic: null argument or requestedAlgoCount < 1");
  }
  cuda_emu::blas::GemmSpec spec;
  cublasStatus_t st = BuildSpec("cublasLtMatmulAlgoGetHeuristic", desc, nullptr, nullptr, Adesc,
                                nullptr, Bdesc, nullptr, nullptr, Cdesc, nullptr, Ddesc, &spec);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  std::string error;
  st = cuda_emu::blas::CheckGemm(spec, /*check_pointers=*/false, &error);
  if (st != CUBLAS_STATUS_SUCCESS) return Refuse(st, error);
  const cuda_emu::blas::LtRefusals refusals = cuda_emu::blas::GetLtRefusals();
  if (refusals.none_found && ShapeSelected(refusals, spec)) {
    cuda_emu::blas::CountLt(-1, false, false, /*heuristic_none=*/true);
    *returned = 0;  // As cuBLASLt: NOT_SUPPORTED and no result.
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmulAlgoGetHeuristic: no algorithm (refused by the test for m=" +
                      std::to_string(spec.m) + " n=" + std::to_string(spec.n) +
                      " k=" + std::to_string(spec.k) + ")");
  }
  const auto& p = *reinterpret_cast<const Preference*>(pref);
  const int n =
      requested < cuda_emu::blas::kLtCandidates ? requested : cuda_emu::blas::kLtCandidates;
  for (int i = 0; i < n; ++i) {
    std::memset(&results[i], 0, sizeof(results[i]));
    results[i].algo.data[0] = kAlgoMarker;
    results[i].algo.data[1] = static_cast<uint64_t>(i);
    for (int o = 0; o < 4; ++o) {
      results[i].algo.data[2 + o] = p.min_alignment[o] < 16 ? p.min_alignment[o] : 16;
    }
    results[i].workspaceSize = 0;
    results[i].state = CUBLAS_STATUS_SUCCESS;
    results[i].wavesCount = 1.0f;
  }
  *returned = n;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* /*workspace*/,
                              size_t /*workspace_bytes*/, cudaStream_t stream) {
  if (handle == nullptr || alpha == nullptr || beta == nullptr) {
    return Refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: null handle, alpha or beta");
  }
  cuda_emu::blas::GemmSpec spec;
  cublasStatus_t st =
      BuildSpec("cublasLtMatmul", desc, static_cast<const float*>(alpha), A, Adesc, B, Bdesc,
                static_cast<const float*>(beta), C, Cdesc, D, Ddesc, &spec);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const AlgoInfo info = DecodeAlgo(algo);
  const cuda_emu::blas::LtRefusals refusals = cuda_emu::blas::GetLtRefusals();
  if (info.index >= 0 && info.index < 32 && (refusals.refuse_algos >> info.index & 1u) != 0 &&
      ShapeSelected(refusals, spec)) {
    cuda_emu::blas::CountLt(info.index, /*refused_algo=*/true, false, false);
    return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                  "cublasLtMatmul: candidate " + std::to_string(info.index) +
                      " refused by the test for m=" + std::to_string(spec.m) +
                      " n=" + std::to_string(spec.n) + " k=" + std::to_string(spec.k));
  }
  if (refusals.enforce_alignment) {
    const cuda_emu::blas::Operand* ops[4] = {&spec.a, &spec.b, &spec.c, &spec.d};
    for (int o = 0; o < 4; ++o) {
      const uint64_t have = Alignment(*ops[o], spec.batch);
      if (have < info.alignment[o]) {
        cuda_emu::blas::CountLt(info.index, false, /*refused_alignment=*/true, false);
        return Refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      std::string("cublasLtMatmul: ") + ops[o]->name + " is " +
                          std::to_string(have) + "-byte aligned, the algorithm needs " +
                          std::to_string(info.alignment[o]) +
                          " (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES)");
      }
    }
  }
  cuda_emu::CensusGemmCall("cublasLtMatmul", spec.a.type, spec.b.type, spec.c.type, spec.d.type,
                           2.0 * spec.m * spec.n * spec.k * spec.batch);
  if (cuda_emu::CensusDryRun()) {  // counted, not run (census.h)
    cuda_emu::blas::CountLt(info.index, false, false, false);
    return CUBLAS_STATUS_SUCCESS;
  }
  // In stream order: everything queued before has run when the stream has drained (the
  // stand-in's own wait, not the caller's: not counted as a host sync).
  cuda_emu::Drain(stream);
  if (cuda_emu::StickyError() != cudaSuccess) {
    return Refuse(CUBLAS_STATUS_EXECUTION_FAILED, "cublasLtMatmul: the stream reported an error");
  }
  std::string error;
  st = cuda_emu::blas::RunGemm(spec, &error);
  if (st == CUBLAS_STATUS_SUCCESS) cuda_emu::blas::CountLt(info.index, false, false, false);
  return st == CUBLAS_STATUS_SUCCESS ? st : Refuse(st, error);
}
