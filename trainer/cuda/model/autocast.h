// GEMM-level autocast for the CUDA BERT's mixed precision: fp32 master weights, activations and
// elementwise kernels stay fp32; only the operands of the matrix products are 16-bit.
//   - weights: one bf16/fp16 copy of the flat parameters, refreshed unit by unit the first time a
//     unit is used after WeightsChanged() (the engine calls it after each optimizer update and
//     after loading a checkpoint), so each step casts the weights once however many
//     micro-batches it has;
//   - activations: each GEMM's fp32 activation operand (forward X, backward dY and X, both
//     operands of the attention products) is cast into one of two scratch slots just before the
//     product. Outputs (and the Linear bias) stay fp32.
// In fp32 mode nothing is cast and operands pass through.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/cuda/kernels/gemm.h"

namespace ringmaster::trainer::cuda {

enum class GemmPrecision { kFp32, kBf16, kFp16 };
const char* GemmPrecisionName(GemmPrecision p);

class Autocast {
 public:
  // `unit_begin`: the flat offset of each parameter unit; `total`: floats of the flat layout.
  static absl::StatusOr<std::unique_ptr<Autocast>> Create(GemmPrecision precision,
                                                          std::vector<size_t> unit_begin,
                                                          size_t total, cudaStream_t stream);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

  bool enabled() const { return precision_ != GemmPrecision::kFp32; }
  GemmPrecision precision() const { return precision_; }
  cudaDataType_t type() const;  // of the GEMM operands

  // Every unit's 16-bit copy is stale (the fp32 weights changed).
  void WeightsChanged();
  // Refreshes unit `unit`'s copy from its fp32 values `params` (device) if stale.
  absl::Status PrepareUnit(int unit, const float* params);
  // The GEMM operand for the weight at flat offset `offset` whose fp32 values are at `fp32`.
  const void* Weight(const float* fp32, size_t offset) const;
  // Casts the fp32 operands of `p` that are still fp32 (the activations) into scratch slots
  // (a: 0, b: 1), then runs it. fp32 mode: runs `p` as is.
  absl::Status Run(GemmProblem p, Gemm* gemm);
  // Casts performed so far (weights units, activation operands): for tests and figures.
  size_t weight_casts() const { return weight_casts_; }
  size_t activation_casts() const { return activation_casts_; }
  size_t device_bytes() const { return weights_bytes_ + 2 * slot_bytes_; }

 private:
  Autocast() = default;
  absl::Status Cast(const float* x, void* y, size_t n);
  absl::Status CastOperand(MatrixRef* m, int64_t stored_rows, int64_t stored_cols, int batch,
                           int slot);

  GemmPrecision precision_ = GemmPrecision::kFp32;
  cudaStream_t stream_ = nullptr;
  std::vector<size_t> unit_begin_;
  size_t total_ = 0;
  std::vector<bool> current_;  // per unit: the 16-bit copy matches the fp32 weights
  void* weights_ = nullptr;    // total 16-bit elements
  size_t weights_bytes_ = 0;
  void* slots_[2] = {nullptr, nullptr};
  size_t slot_bytes_ = 0;
  size_t weight_casts_ = 0, activation_casts_ = 0;
};

}  // namespace ringmaster::trainer::cuda
