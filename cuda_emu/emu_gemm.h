// The GEMM both cuBLAS stand-ins (cublaslt_emu.cc, cublas_emu.cc) run: column-major
// D = epilogue(alpha·op(A)·op(B) + beta·C) with fp32 accumulation, strided batches and the
// cuBLASLt epilogues a BERT trainer uses. The API files translate descriptors into a GemmSpec;
// this file checks the spec (shapes, types, every operand inside one cudaMalloc allocation) and
// computes. Errors are returned as text naming the operand, and the API files print them.
#pragma once

#include <cublas_api.h>
#include <library_types.h>

#include <cstdint>
#include <string>

namespace cuda_emu::blas {

// One matrix operand as cuBLAS describes it: `rows` x `cols` column-major, element (i, j) at
// i + j*ld, batch b at b*stride (elements). `name` is used in error messages ("A", "bias").
struct Operand {
  const char* name = "";
  const void* ptr = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  int64_t stride = 0;
};

enum class Epilogue {
  kDefault,
  kBias,
  kGelu,
  kGeluBias,
  kGeluAux,
  kGeluAuxBias,
  kDGelu,
  kDGeluBGrad,
  kBGradA,
  kBGradB,
};

// The GELU form of the GELU epilogues. cuBLASLt's is believed to be the tanh approximation (not
// confirmed on a GPU yet); env CUDA_EMU_CUBLASLT_GELU=tanh|erf selects it, default tanh.
enum class GeluForm { kTanh, kErf };
GeluForm CurrentGeluForm();  // Parses CUDA_EMU_CUBLASLT_GELU on every call (tests set it).
float Gelu(GeluForm form, float x);
float GeluDerivative(GeluForm form, float x);

// Rounds an fp32 value to TF32 (8-bit exponent, 10-bit mantissa): nearest, ties away from zero,
// as the conversion instruction cvt.rna.tf32.f32 does; Inf and NaN pass through.
float RoundToTf32(float x);

struct GemmSpec {
  const char* api = "";  // "cublasLtMatmul", "cublasGemmEx", ... for messages.
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  float alpha = 1.0f;
  float beta = 0.0f;
  bool tf32 = false;   // Round A and B to TF32 before multiplying.
  Operand a, b, c, d;  // a is stored (trans_a ? k x m : m x k); b (trans_b ? n x k : k x n).
  Epilogue epilogue = Epilogue::kDefault;
  const void* bias = nullptr;  // BIAS: input, m elements; BGRAD*: output (m, or n for BGRADB).
  cudaDataType_t bias_type = CUDA_R_32F;
  const void* aux = nullptr;  // GELU_AUX*: output m x n with aux_ld; DGELU*: input.
  cudaDataType_t aux_type = CUDA_R_32F;
  int64_t aux_ld = 0;
};

// Checks `spec` without touching memory it points to except through the allocation table:
// CUBLAS_STATUS_INVALID_VALUE for inconsistent shapes or an operand outside its allocation,
// CUBLAS_STATUS_NOT_SUPPORTED for a type combination the stand-in does not implement. On
// failure `*error` says what and names the operand.
cublasStatus_t CheckGemm(const GemmSpec& spec, bool check_pointers, std::string* error);

// CheckGemm, then computes. Synchronous: the caller has already drained the stream.
cublasStatus_t RunGemm(const GemmSpec& spec, std::string* error);

// Bytes of one element; 0 for a type the stand-ins do not support.
size_t ElementBytes(cudaDataType_t type);
const char* TypeName(cudaDataType_t type);

}  // namespace cuda_emu::blas
