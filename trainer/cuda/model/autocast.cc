#include "trainer/cuda/model/autocast.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {

const char* GemmPrecisionName(GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBf16:
      return "bf16";
    case GemmPrecision::kFp16:
      return "fp16";
    default:
      return "fp32";
  }
}

absl::StatusOr<std::unique_ptr<Autocast>> Autocast::Create(GemmPrecision precision,
                                                           std::vector<size_t> unit_begin,
                                                           size_t total, cudaStream_t stream) {
  std::unique_ptr<Autocast> a(new Autocast());
  a->precision_ = precision;
  a->stream_ = stream;
  a->unit_begin_ = std::move(unit_begin);
  a->total_ = total;
  a->current_.assign(a->unit_begin_.size(), false);
  if (a->enabled() && total > 0) {
    a->weights_bytes_ = total * 2;
    RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&a->weights_, a->weights_bytes_));
  }
  return a;
}

Autocast::~Autocast() {
  for (void* p : {weights_, slots_[0], slots_[1]}) {
    if (p != nullptr) cudaFree(p);
  }
}

cudaDataType_t Autocast::type() const {
  switch (precision_) {
    case GemmPrecision::kBf16:
      return CUDA_R_16BF;
    case GemmPrecision::kFp16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

void Autocast::WeightsChanged() { current_.assign(current_.size(), false); }

absl::Status Autocast::Cast(const float* x, void* y, size_t n) {
  if (precision_ == GemmPrecision::kBf16) {
    RM_CUDA_RETURN_IF_ERROR(CastToBf16(x, static_cast<__nv_bfloat16*>(y), n, stream_));
  } else {
    RM_CUDA_RETURN_IF_ERROR(CastToFp16(x, static_cast<__half*>(y), n, stream_));
  }
  return absl::OkStatus();
}

absl::Status Autocast::PrepareUnit(int unit, const float* params) {
  if (!enabled() || current_[unit]) return absl::OkStatus();
  const size_t begin = unit_begin_[unit];
  const size_t end =
      unit + 1 < static_cast<int>(unit_begin_.size()) ? unit_begin_[unit + 1] : total_;
  RM_RETURN_IF_ERROR(Cast(params, static_cast<char*>(weights_) + begin * 2, end - begin));
  current_[unit] = true;
  ++weight_casts_;
  return absl::OkStatus();
}

const void* Autocast::Weight(const float* fp32, size_t offset) const {
  if (!enabled()) return fp32;
  return static_cast<const char*>(weights_) + offset * 2;
}

absl::Status Autocast::CastOperand(MatrixRef* m, int64_t stored_rows, int64_t stored_cols,
                                   int batch, int slot) {
  if (m->type != CUDA_R_32F) return absl::OkStatus();  // a weight, already 16-bit
  // The operand's whole extent, gaps between rows included (the pooler reads every S-th row).
  const size_t n =
      static_cast<size_t>((batch - 1) * m->batch_stride + (stored_rows - 1) * m->ld + stored_cols);
  if (n * 2 > slot_bytes_) {
    RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));  // the old slots may be in use
    for (void*& p : slots_) {
      if (p != nullptr) RM_CUDA_RETURN_IF_ERROR(cudaFree(p));
      p = nullptr;
    }
    slot_bytes_ = 0;
    for (void*& p : slots_) RM_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n * 2));
    slot_bytes_ = n * 2;
  }
  RM_RETURN_IF_ERROR(Cast(static_cast<const float*>(m->ptr), slots_[slot], n));
  m->ptr = slots_[slot];
  m->type = type();
  ++activation_casts_;
  return absl::OkStatus();
}

absl::Status Autocast::Run(GemmProblem p, Gemm* gemm) {
  if (enabled() && p.M > 0 && p.N > 0 && p.K > 0) {
    RM_RETURN_IF_ERROR(
        CastOperand(&p.a, p.a.transpose ? p.K : p.M, p.a.transpose ? p.M : p.K, p.batch, 0));
    RM_RETURN_IF_ERROR(
        CastOperand(&p.b, p.b.transpose ? p.N : p.K, p.b.transpose ? p.K : p.N, p.batch, 1));
    if (p.a.type != p.b.type) {
      return absl::InternalError(absl::StrFormat(
          "autocast: operands of types %d and %d (a weight not prepared?)", p.a.type, p.b.type));
    }
  }
  return gemm->Run(p, stream_);
}

}  // namespace ringmaster::trainer::cuda
