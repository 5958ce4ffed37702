#include "cuda_emu/emu_gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "cuda_emu/emu_device_range.h"
#include "cuda_emu/memory.h"

namespace cuda_emu::blas {
namespace {

float Load(const void* p, cudaDataType_t t, int64_t i) {
  switch (t) {
    case CUDA_R_32F:
      return static_cast<const float*>(p)[i];
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(p)[i]);
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return NAN;  // Unreachable: CheckGemm refuses other types.
  }
}

// Round-to-nearest-even into the destination type, as cuBLAS's output conversion does.
void Store(void* p, cudaDataType_t t, int64_t i, float v) {
  switch (t) {
    case CUDA_R_32F:
      static_cast<float*>(p)[i] = v;
      break;
    case CUDA_R_16F:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    default:
      break;
  }
}

bool Supported(cudaDataType_t t) { return ElementBytes(t) != 0; }

bool HasBiasInput(Epilogue e) {
  return e == Epilogue::kBias || e == Epilogue::kGeluBias || e == Epilogue::kGeluAuxBias;
}
bool HasGelu(Epilogue e) {
  return e == Epilogue::kGelu || e == Epilogue::kGeluBias || e == Epilogue::kGeluAux ||
         e == Epilogue::kGeluAuxBias;
}
bool WritesAux(Epilogue e) { return e == Epilogue::kGeluAux || e == Epilogue::kGeluAuxBias; }
bool ReadsAux(Epilogue e) { return e == Epilogue::kDGelu || e == Epilogue::kDGeluBGrad; }
bool WritesBiasGrad(Epilogue e) {
  return e == Epilogue::kDGeluBGrad || e == Epilogue::kBGradA || e == Epilogue::kBGradB;
}

std::string Describe(const Operand& o) {
  return absl::StrFormat("%s (%s, %dx%d, ld %d, batch stride %d, at %p)", o.name, TypeName(o.type),
                         o.rows, o.cols, o.ld, o.stride, o.ptr);
}

// Checks one operand's layout and that its whole extent over `batch` batches lies inside one
// allocation.
cublasStatus_t CheckOperand(const GemmSpec& s, const Operand& o, bool check_pointer,
                            std::string* error) {
  if (!Supported(o.type)) {
    *error = absl::StrFormat("%s: %s has data type %d; the stand-in supports fp32, fp16, bf16",
                             s.api, o.name, static_cast<int>(o.type));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (o.rows < 0 || o.cols < 0 || o.ld < std::max<int64_t>(1, o.rows) || o.stride < 0) {
    *error = absl::StrFormat("%s: %s: leading dimension below the row count, or negative sizes",
                             s.api, Describe(o));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!check_pointer || o.rows == 0 || o.cols == 0) return CUBLAS_STATUS_SUCCESS;
  const int64_t last = (s.batch - 1) * o.stride + (o.cols - 1) * o.ld + (o.rows - 1);
  const std::string range =
      CheckDeviceRange(o.ptr, static_cast<size_t>(last + 1) * ElementBytes(o.type));
  if (!range.empty()) {
    *error = absl::StrFormat("%s: %s, %d batches: %s", s.api, Describe(o), s.batch, range);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CheckVector(const GemmSpec& s, const char* name, const void* p, cudaDataType_t type,
                           int64_t n, std::string* error) {
  if (!Supported(type)) {
    *error = absl::StrFormat("%s: %s has data type %d; the stand-in supports fp32, fp16, bf16",
                             s.api, name, static_cast<int>(type));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const std::string range = CheckDeviceRange(p, static_cast<size_t>(n) * ElementBytes(type));
  if (!range.empty()) {
    *error = absl::StrFormat("%s: %s (%s, %d elements, at %p): %s", s.api, name, TypeName(type), n,
                             p, range);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Loads batch `bt` of op(X) into a dense row-major-by-column fp32 matrix: out[r + c*rows] is
// op(X)(r, c) for an op(X) of `rows` x `cols`.
void LoadOp(const Operand& o, bool trans, int64_t bt, int64_t rows, int64_t cols, bool tf32,
            std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  const int64_t base = bt * o.stride;
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t idx = base + (trans ? c + r * o.ld : r + c * o.ld);
      const float v = Load(o.ptr, o.type, idx);
      out[r + c * rows] = tf32 ? RoundToTf32(v) : v;
    }
  }
}

}  // namespace

size_t ElementBytes(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

const char* TypeName(cudaDataType_t type) {
  switch (type) {
    case CUDA_R_32F:
      return "fp32";
    case CUDA_R_16F:
      return "fp16";
    case CUDA_R_16BF:
      return "bf16";
    default:
      return "unsupported type";
  }
}

GeluForm CurrentGeluForm() {
  const char* v = std::getenv("CUDA_EMU_CUBLASLT_GELU");
  if (v != nullptr && std::strcmp(v, "erf") == 0) return GeluForm::kErf;
  return GeluForm::kTanh;
}

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
}  // namespace

float Gelu(GeluForm form, float x) {
  if (form == GeluForm::kErf) return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

float GeluDerivative(GeluForm form, float x) {
  if (form == GeluForm::kErf) {
    return 0.5f * (1.0f + std::erf(x * 0.70710678118654752f)) +
           x * std::exp(-0.5f * x * x) * 0.3989422804014327f;  // 1/sqrt(2 pi)
  }
  const float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

float RoundToTf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // Inf, NaN.
  u += 0x1000u;      // Half of the 13 dropped bits: ties go away from zero.
  u &= 0xffffe000u;  // Keep sign, exponent and the top 10 mantissa bits.
  std::memcpy(&x, &u, 4);
  return x;
}

cublasStatus_t CheckGemm(const GemmSpec& s, bool check_pointers, std::string* error) {
  if (s.m < 0 || s.n < 0 || s.k < 0 || s.batch < 1) {
    *error = absl::StrFormat("%s: negative size m=%d n=%d k=%d or batch %d < 1", s.api, s.m, s.n,
                             s.k, s.batch);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  auto shape_error = [&](const Operand& o, int64_t rows, int64_t cols) {
    *error = absl::StrFormat(
        "%s: %s is %dx%d but the product (m=%d n=%d k=%d, op(A) %s, op(B) %s) needs %dx%d", s.api,
        o.name, o.rows, o.cols, s.m, s.n, s.k, s.trans_a ? "T" : "N", s.trans_b ? "T" : "N", rows,
        cols);
    return CUBLAS_STATUS_INVALID_VALUE;
  };
  if (s.a.rows != a_rows || s.a.cols != a_cols) return shape_error(s.a, a_rows, a_cols);
  if (s.b.rows != b_rows || s.b.cols != b_cols) return shape_error(s.b, b_rows, b_cols);
  if (s.d.rows != s.m || s.d.cols != s.n) return shape_error(s.d, s.m, s.n);
  const bool reads_c = s.beta != 0.0f;
  if (reads_c && (s.c.rows != s.m || s.c.cols != s.n)) return shape_error(s.c, s.m, s.n);
  // Types: A and B alike; C and D alike; fp32 inputs give fp32 outputs.
  if (s.a.type != s.b.type || (reads_c && s.c.type != s.d.type) ||
      (s.a.type == CUDA_R_32F && s.d.type != CUDA_R_32F) ||
      (s.d.type != CUDA_R_32F && s.d.type != s.a.type)) {
    *error = absl::StrFormat(
        "%s: type combination A %s, B %s, C %s, D %s is not supported (A = B; C = D; D is "
        "fp32 or A's type)",
        s.api, TypeName(s.a.type), TypeName(s.b.type), TypeName(s.c.type), TypeName(s.d.type));
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (s.epilogue != Epilogue::kDefault && s.batch != 1) {
    *error = absl::StrFormat("%s: epilogues other than DEFAULT need batch count 1 (got %d)", s.api,
                             s.batch);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  cublasStatus_t st;
  if ((st = CheckOperand(s, s.a, check_pointers, error)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = CheckOperand(s, s.b, check_pointers, error)) != CUBLAS_STATUS_SUCCESS) return st;
  if (reads_c && (st = CheckOperand(s, s.c, check_pointers, error)) != CUBLAS_STATUS_SUCCESS) {
    return st;
  }
  if ((st = CheckOperand(s, s.d, check_pointers, error)) != CUBLAS_STATUS_SUCCESS) return st;

  if (HasBiasInput(s.epilogue) || WritesBiasGrad(s.epilogue)) {
    const int64_t len = s.epilogue == Epilogue::kBGradB ? s.n : s.m;
    if (check_pointers || s.bias != nullptr) {
      st = CheckVector(s, "bias", s.bias, s.bias_type, len, error);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
    } else if (!Supported(s.bias_type)) {
      return CheckVector(s, "bias", s.bias, s.bias_type, len, error);
    }
  }
  if (WritesAux(s.epilogue) || ReadsAux(s.epilogue)) {
    if (s.aux_ld < std::max<int64_t>(1, s.m) || s.aux_ld % 8 != 0) {
      *error =
          absl::StrFormat("%s: EPILOGUE_AUX_LD %d must be >= the %d rows of D and divisible by 8",
                          s.api, s.aux_ld, s.m);
      return CUBLAS_STATUS_INVALID_VALUE;
    }
    Operand aux{"epilogue aux", s.aux, s.aux_type, s.m, s.n, s.aux_ld, 0};
    if ((st = CheckOperand(s, aux, check_pointers, error)) != CUBLAS_STATUS_SUCCESS) return st;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t RunGemm(const GemmSpec& s, std::string* error) {
  cuda_emu::DeviceAccessScope access;  // the product reads and writes device memory
  const cublasStatus_t st = CheckGemm(s, /*check_pointers=*/true, error);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const GeluForm form = CurrentGeluForm();
  const bool reads_c = s.beta != 0.0f;
  std::vector<float> a, b, acc, bias_grad;
  for (int64_t bt = 0; bt < s.batch; ++bt) {
    LoadOp(s.a, s.trans_a, bt, s.m, s.k, s.tf32, a);  // op(A): m x k
    LoadOp(s.b, s.trans_b, bt, s.k, s.n, s.tf32, b);  // op(B): k x n
    // acc(i, j) = sum over p in increasing order of op(A)(i, p) * op(B)(p, j), in fp32.
    acc.assign(static_cast<size_t>(s.m * s.n), 0.0f);
    for (int64_t j = 0; j < s.n; ++j) {
      float* col = acc.data() + j * s.m;
      for (int64_t p = 0; p < s.k; ++p) {
        const float bv = b[p + j * s.k];
        const float* acol = a.data() + p * s.m;
        for (int64_t i = 0; i < s.m; ++i) col[i] += acol[i] * bv;
      }
    }
    // The whole product is in `acc` before D is written, so C and D may alias.
    const int64_t c_base = bt * s.c.stride, d_base = bt * s.d.stride;
    if (WritesBiasGrad(s.epilogue)) {
      bias_grad.assign(static_cast<size_t>(s.epilogue == Epilogue::kBGradB ? s.n : s.m), 0.0f);
    }
    for (int64_t j = 0; j < s.n; ++j) {
      for (int64_t i = 0; i < s.m; ++i) {
        float v = s.alpha * acc[i + j * s.m];
        if (reads_c) v += s.beta * Load(s.c.ptr, s.c.type, c_base + i + j * s.c.ld);
        if (HasBiasInput(s.epilogue)) v += Load(s.bias, s.bias_type, i);
        if (WritesAux(s.epilogue)) Store(const_cast<void*>(s.aux), s.aux_type, i + j * s.aux_ld, v);
        if (HasGelu(s.epilogue)) v = Gelu(form, v);
        if (ReadsAux(s.epilogue))
          v *= GeluDerivative(form, Load(s.aux, s.aux_type, i + j * s.aux_ld));
        if (s.epilogue == Epilogue::kDGeluBGrad) bias_grad[i] += v;
        Store(const_cast<void*>(s.d.ptr), s.d.type, d_base + i + j * s.d.ld, v);
      }
    }
    // BGRADA / BGRADB: sums of op(A)'s rows / op(B)'s columns over k, from the loaded (and, in
    // TF32 mode, rounded) operands, unscaled by alpha.
    if (s.epilogue == Epilogue::kBGradA) {
      for (int64_t p = 0; p < s.k; ++p) {
        for (int64_t i = 0; i < s.m; ++i) bias_grad[i] += a[i + p * s.m];
      }
    } else if (s.epilogue == Epilogue::kBGradB) {
      for (int64_t j = 0; j < s.n; ++j) {
        for (int64_t p = 0; p < s.k; ++p) bias_grad[j] += b[p + j * s.k];
      }
    }
    if (WritesBiasGrad(s.epilogue)) {
      for (size_t i = 0; i < bias_grad.size(); ++i) {
        Store(const_cast<void*>(s.bias), s.bias_type, static_cast<int64_t>(i), bias_grad[i]);
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace cuda_emu::blas
