// A compressed all-reduce (sum) in two stages, reduce-scatter then all-gather, each encoded with
// a wire codec, with error feedback and zero-chunk skipping. It communicates only through the
// collectives the caller passes, so the same code runs over Gloo, NCCL or a test fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer {

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

}  // namespace ringmaster::trainer
