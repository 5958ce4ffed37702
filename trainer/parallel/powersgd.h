// PowerSGD (Vogels, Karimireddy & Jaggi, 2019): low-rank gradient compression with sum
// semantics. It communicates only through the all-reduce callback the caller passes
// (PowerSgd::AllReduce's `allreduce_sum`), so the same code runs over Gloo, NCCL or a test fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer {

// A row-major rows x cols matrix stored at buffer[offset .. offset + rows*cols).
struct MatrixRange {
  size_t offset;
  size_t rows;
  size_t cols;
};

struct PowerSgdOptions {
  // Target rank. A matrix uses r = min(rank, rows, cols) (a larger r cannot be more exact).
  int rank = 4;
  // Seeds the initial Q matrices (with the matrix index), identically on every rank.
  uint64_t seed = 0;
  // A matrix is sent exactly instead of compressed when rows*cols < rate*(rows+cols)*r, i.e. when
  // compression would not shrink it by at least this factor. 0 compresses every matrix.
  int min_compression_rate = 2;
};

// The pieces PowerSgd is made of, shared with its GPU twin
// (trainer/cuda/parallel/device_powersgd.h) so that both choose the same matrices, start from the
// same Q and orthonormalise alike.
struct PowerSgdMatrixPlan {
  size_t index;  // position in the constructor's `matrices` (seeds its Q)
  size_t offset, rows, cols, rank;
};
struct PowerSgdPlan {
  std::vector<PowerSgdMatrixPlan> compressed;           // in the caller's order
  std::vector<std::pair<size_t, size_t>> uncompressed;  // (offset, size) spans, sorted
  size_t uncompressed_floats = 0;
};
// Validates `matrices` (inside [0, total), not overlapping; InvalidArgument naming the matrix
// otherwise) and picks those worth compressing (see PowerSgdOptions::min_compression_rate).
absl::StatusOr<PowerSgdPlan> PlanPowerSgd(const std::vector<MatrixRange>& matrices, size_t total,
                                          const PowerSgdOptions& options);
// Matrix `index`'s initial Q (n floats), standard normal from (seed, index) only: the same on
// every rank and platform.
void PowerSgdInitialQ(uint64_t seed, size_t index, float* q, size_t n);
// Orthonormalises the columns of the row-major rows x r matrix `p` (r <= rows) in double (see
// PowerSgd::AllReduce); `work` is scratch.
void PowerSgdOrthonormalise(float* p, size_t rows, size_t r, std::vector<double>& work);
// The warm start: Q' (cols x r, row-major) with unit columns into q. False, q untouched, when Q'
// is not finite (the caller restarts from the seeded Q).
bool PowerSgdWarmStart(const float* q_new, size_t cols, size_t r, float* q);

// One instance per rank; not thread-safe. All ranks must construct it with the same matrices,
// total and options.
class PowerSgd {
 public:
  // `matrices` lie inside a flat buffer of `total` floats and must not overlap; every element
  // outside the compressed matrices is sent exactly. Invalid ranges or options make every
  // AllReduce (and SetState) return InvalidArgument; see init_status().
  PowerSgd(std::vector<MatrixRange> matrices, size_t total, PowerSgdOptions options);

  // Replaces grads[0..total) on every rank with (approximately) the sum over ranks of grads,
  // using `allreduce_sum(data, n)` (a collective: every rank calls it in the same order with the
  // same n; it must leave bit-identical sums on all ranks).
  //  - Elements outside compressed matrices: summed exactly, packed into one allreduce.
  //  - Compressed matrices M_i = this rank's gradient + its error-feedback residual e_i:
  //    P = sum_ranks M_i Q (one allreduce, all matrices' P packed), orthonormalise P's columns
  //    (modified Gram-Schmidt in double; a degenerate column is replaced by a unit vector
  //    orthogonal to the others so P stays orthonormal), Q' = sum_ranks M_i^T P (one allreduce,
  //    packed), result M^ = P Q'^T (the projection of the sum onto span(P)); new residual
  //    e_i = M_i - M^ / world_size. Q' (columns scaled to unit length, which leaves the next P's
  //    span unchanged and keeps magnitudes bounded) is the warm start for the next call.
  // Collective order: uncompressed elements, P, Q' (each skipped when empty, on every rank alike).
  // Non-finite values: a NaN/inf gradient shows up in this call's output; a residual element that
  // would be non-finite is set to 0 and a non-finite Q' restarts from the seeded Q, so one bad
  // step does not poison every later one.
  // Note (as in the paper and PyTorch's hook): each rank's residual carries its deviation from the
  // mean, which cancels in the sum over ranks but is not bounded per rank on its own.
  // On error nothing is modified (grads, residuals and Q keep their previous values), but the
  // collective itself is in an unknown state, as with any failed collective.
  absl::Status AllReduce(float* grads, int world_size,
                         const std::function<absl::Status(float*, size_t)>& allreduce_sum);

  // Floats this rank passes to allreduce_sum per AllReduce (all allreduce sizes added):
  // uncompressed elements + sum over compressed matrices of (rows + cols) * r.
  size_t wire_floats_per_call() const;
  size_t raw_floats() const { return total_; }
  // Bytes held between calls: residuals, Q and the scratch buffers (M, P, Q', packed exact part).
  size_t held_bytes() const;
  // Number of matrices that are compressed (the others are sent exactly).
  size_t compressed_matrices() const { return compressed_.size(); }
  const absl::Status& init_status() const { return init_status_; }

  // Error-feedback residuals and Q matrices, for checkpoints. Layout: for each compressed matrix in
  // the order given to the constructor, its residual (rows*cols) then its Q (cols*r), row-major.
  // Residuals differ per rank; Q is identical on all ranks. SetState requires the exact size.
  std::vector<float> State() const;
  absl::Status SetState(const std::vector<float>& s);

 private:
  struct Compressed {
    size_t index;  // position in the constructor's `matrices`
    size_t offset, rows, cols, rank;
    size_t p_offset;              // into the packed P buffer (rows * rank floats)
    size_t q_offset;              // into the packed Q' buffer (cols * rank floats)
    size_t m_offset;              // into m_buf_ (rows * cols floats)
    std::vector<float> residual;  // rows * cols
    std::vector<float> q;         // cols * rank, row-major
  };
  struct Span {
    size_t offset, size;
  };

  absl::Status init_status_;
  size_t total_ = 0;
  PowerSgdOptions options_;
  std::vector<Compressed> compressed_;
  std::vector<Span> uncompressed_;  // sorted, non-empty spans outside compressed matrices
  size_t uncompressed_floats_ = 0;
  size_t p_floats_ = 0, q_floats_ = 0, m_floats_ = 0;
  std::vector<float> unc_buf_, p_buf_, q_buf_;  // scratch, reused across calls
  std::vector<float> m_buf_;                    // M = G + E of every compressed matrix
  std::vector<double> gs_work_;                 // Gram-Schmidt scratch
};

}  // namespace ringmaster::trainer
