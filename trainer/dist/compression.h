// Gradient compression for the data-parallel wire: element codecs (fp16, bf16, blockwise int8,
// each with optional error feedback) and PowerSGD low-rank compression with sum semantics.
//
// Pure computation: nothing here communicates except through the callbacks the caller passes
// (PowerSgd::AllReduce's `allreduce_sum`), so the same code runs over Gloo, NCCL or a test fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer {

// ---------------------------------------------------------------------------------------------
// Part 1: element codecs.
//
// Wire formats (all multi-byte values little-endian, no header; the receiver knows c and n):
//  - kNone: n fp32 values.
//  - kFp16: n IEEE binary16 values, round-to-nearest-even, subnormals kept. Finite values beyond
//    ±65504 and ±inf saturate to ±65504, so a gradient never becomes inf on the wire (an fp32
//    gradient that is already inf arrives as ±65504); NaN stays NaN (quiet).
//  - kBf16: n bfloat16 values (top 16 bits of the fp32, round-to-nearest-even); NaN stays NaN.
//    bf16 has fp32's range, so only values within half a bf16 ulp of FLT_MAX round to inf.
//  - kInt8: blocks of kInt8BlockSize elements (the last one may be shorter). First all block
//    scales (fp32, scale = max|y| / 127 over the block; a block whose max |y| is 0 or subnormal,
//    below 2^-126, has scale 0 and is sent as zeros, its residual cleared), then the n int8 codes,
//    code = round-half-away-from-zero(y / scale) clamped to [-127, 127]. Decode is code * scale. A
//    block containing inf or NaN gets a non-finite scale and decodes to NaN, so an overflow stays
//    visible instead of being silently dropped.
enum class WireCodec { kNone, kFp16, kBf16, kInt8 };

// "none", "fp16", "bf16", "int8" (exact, lower case); anything else is InvalidArgument.
absl::StatusOr<WireCodec> ParseWireCodec(std::string_view name);
std::string_view WireCodecName(WireCodec c);

inline constexpr size_t kInt8BlockSize = 256;

// Bytes that Encode writes for n floats (kNone: 4n; fp16/bf16: 2n; int8: 4*ceil(n/256) + n).
size_t EncodedBytes(WireCodec c, size_t n);

// Encodes x[0..n) into out[0..EncodedBytes(c, n)). With residual != nullptr (error feedback) it
// encodes y = x + residual and then sets residual = y - Decode(encoded), exactly what the
// receiver will see, so the quantisation error is carried into the next step instead of lost.
// A residual that would be non-finite (y was inf/NaN) is set to 0 instead: the bad value is sent
// this step (visible to the receiver, as NaN or ±65504 for fp16) but not re-sent forever.
// `residual` may not alias `x` or `out`.
void Encode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out);
// out[0..n) = decoded values.
void Decode(WireCodec c, const uint8_t* in, size_t n, float* out);
// acc[0..n) += decoded values.
void DecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc);

// An all-reduce (sum) whose every byte on the wire is encoded with `codec`, for g ranks each
// calling it with its own data[0..n) (kNone sends fp32 exactly: the sum in rank order).
//
// data is cut into chunks of kInt8BlockSize floats (the last one may be shorter); the chunks
// taking part are the "active" ones, m of them, and every chunk is encoded on its own (for int8:
// one scale and 256 codes, i.e. an int8 block). The m active chunks, in order, are dealt out to
// the ranks in runs of per = ceil(m/g) (the last runs padded with zero chunks):
//   stage 1, reduce-scatter: each rank encodes run r for rank r, one all-to-all exchanges them,
//     and rank r sums the g decoded copies of its run (in rank order);
//   stage 2, all-gather: each rank encodes its sums, an all-gather shares them, and every rank
//     decodes all g runs into data. Every rank ends with the same bits.
// Zero-chunk skipping (`skip_zero_chunks`): first an all-gather of one bit per chunk ("this rank
// has a non-zero value, or residual, in it"); a chunk is active when any rank set its bit. A
// chunk that is zero on every rank sums to zero exactly, so it is neither sent nor written:
// lossless. It pays for gradients with rows that are zero (an embedding table, whose rows for
// tokens not in the batch get no gradient). Without skipping every chunk is active and there is
// no extra round. Every rank must pass the same `skip_zero_chunks`.
//
// With `residual` (n floats, zero at first, kept across calls: error feedback) the quantisation
// error of both stages is carried into the next call: stage 1's for what this rank sent, stage
// 2's for the sums this rank owned (added at their positions; the sum is linear, so it arrives
// when any rank sends it). data is written only after both collectives succeeded; residual may
// already have been updated when a collective fails (the step is lost with it).
// `all_to_all(send, recv, bytes_per_rank)` and `all_gather(in, out, bytes_per_rank)` are the
// collectives (every rank calls them in the same order with the same sizes). The buffers in
// `scratch` are reused from call to call, so a caller that keeps it allocates nothing per step.
struct TwoStageScratch {
  std::vector<uint8_t> send, recv;
  std::vector<float> sum, tail, tail_residual;
  std::vector<uint8_t> mask, masks;
  std::vector<uint32_t> active;
  size_t bytes() const {
    return send.capacity() + recv.capacity() + mask.capacity() + masks.capacity() +
           (sum.capacity() + tail.capacity() + tail_residual.capacity()) * sizeof(float) +
           active.capacity() * sizeof(uint32_t);
  }
};
// What one call did, identical on every rank.
struct TwoStageStats {
  size_t chunks = 0;         // ceil(n / kInt8BlockSize)
  size_t active_chunks = 0;  // chunks sent (all of them without skipping)
  size_t wire_bytes = 0;     // bytes this rank sent, the bit masks included
};
using AllToAllFn = std::function<absl::Status(const void* in, void* out, size_t bytes_per_rank)>;
using AllGatherFn = std::function<absl::Status(const void* in, void* out, size_t bytes_per_rank)>;
// Floats of residual TwoStageAllReduce needs for n floats: n.
inline size_t TwoStageResidualFloats(size_t n) { return n; }
// Bytes each rank sends when `active` chunks take part: 2 (g - 1) EncodedBytes(codec, per·256),
// per = ceil(active / g); plus (g - 1) ceil(chunks / 8) for the masks when skipping.
size_t TwoStageWireBytes(WireCodec codec, size_t active, size_t chunks, int g, bool skip);
absl::Status TwoStageAllReduce(WireCodec codec, int g, int rank, float* data, size_t n,
                               float* residual, bool skip_zero_chunks, TwoStageScratch& scratch,
                               const AllToAllFn& all_to_all, const AllGatherFn& all_gather,
                               TwoStageStats* stats = nullptr);

// ---------------------------------------------------------------------------------------------
// Part 2: PowerSGD (Vogels, Karimireddy & Jaggi, 2019) with sum semantics.

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
