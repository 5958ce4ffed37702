// The codec-encoded two-stage all-reduce (two_stage_allreduce.h).
#include "trainer/parallel/two_stage_allreduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

// As in wire_codec.cc: clang contracts nothing into FMAs here either (GCC's default applies).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace ringmaster::trainer {

namespace {
constexpr size_t kChunk = kInt8BlockSize;  // TwoStageAllReduce's unit of skipping and encoding

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// True when data[0..len) or residual[0..len) (when given) holds a value that is not ±0 (NaN
// included).
bool ChunkIsNonZero(const float* data, const float* residual, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (data[i] != 0.0f) return true;
  }
  if (residual != nullptr) {
    for (size_t i = 0; i < len; ++i) {
      if (residual[i] != 0.0f) return true;
    }
  }
  return false;
}
}  // namespace

size_t TwoStageWireBytes(WireCodec codec, size_t active, size_t chunks, int g, bool skip) {
  const size_t peers = static_cast<size_t>(g) - 1;
  if (peers == 0) return 0;
  const size_t per = CeilDiv(active, static_cast<size_t>(g));
  return 2 * EncodedBytes(codec, per * kChunk) * peers + (skip ? CeilDiv(chunks, 8) * peers : 0);
}

absl::Status TwoStageAllReduce(WireCodec codec, int g, int rank, float* data, size_t n,
                               float* residual, bool skip, TwoStageScratch& sc,
                               const AllToAllFn& all_to_all, const AllGatherFn& all_gather,
                               TwoStageStats* stats) {
  if (g < 1 || rank < 0 || rank >= g) {
    return absl::InvalidArgumentError(
        absl::StrCat("TwoStageAllReduce: rank ", rank, " of ", g, " ranks"));
  }
  const size_t gs = static_cast<size_t>(g);
  const size_t me = static_cast<size_t>(rank);
  const size_t chunks = CeilDiv(n, kChunk);
  auto chunk_len = [&](size_t c) { return std::min(kChunk, n - c * kChunk); };

  // Which chunks take part: all of them, or those some rank has a non-zero value in.
  sc.active.clear();
  if (skip) {
    const size_t mask_bytes = CeilDiv(chunks, 8);
    sc.mask.assign(mask_bytes, 0);
    for (size_t c = 0; c < chunks; ++c) {
      const float* res = residual != nullptr ? residual + c * kChunk : nullptr;
      if (ChunkIsNonZero(data + c * kChunk, res, chunk_len(c))) {
        sc.mask[c / 8] |= static_cast<uint8_t>(1u << (c % 8));
      }
    }
    sc.masks.resize(mask_bytes * gs);
    if (mask_bytes > 0) RM_RETURN_IF_ERROR(all_gather(sc.mask.data(), sc.masks.data(), mask_bytes));
    for (size_t r = 1; r < gs; ++r) {
      for (size_t i = 0; i < mask_bytes; ++i) sc.masks[i] |= sc.masks[r * mask_bytes + i];
    }
    for (size_t c = 0; c < chunks; ++c) {
      if ((sc.masks[c / 8] >> (c % 8)) & 1u) sc.active.push_back(static_cast<uint32_t>(c));
    }
  } else {
    sc.active.resize(chunks);
    for (size_t c = 0; c < chunks; ++c) sc.active[c] = static_cast<uint32_t>(c);
  }
  const size_t m = sc.active.size();
  if (stats != nullptr) {
    stats->chunks = chunks;
    stats->active_chunks = m;
    stats->wire_bytes = TwoStageWireBytes(codec, m, chunks, g, skip);
  }
  if (m == 0) return absl::OkStatus();  // zero everywhere: the sum is data as it is

  const size_t per = CeilDiv(m, gs);              // chunks per rank's run
  const size_t cb = EncodedBytes(codec, kChunk);  // bytes per encoded chunk
  const size_t bytes = per * cb;                  // bytes per rank's run
  sc.send.resize(bytes * gs);
  sc.recv.resize(bytes * gs);
  sc.sum.resize(per * kChunk);
  sc.tail.resize(kChunk);
  sc.tail_residual.resize(kChunk);
  // Encodes chunk c (+ its residual, updated) into out; a short last chunk goes through the
  // zero-padded tail buffers.
  auto encode_chunk = [&](size_t c, uint8_t* out) {
    const size_t len = chunk_len(c);
    float* src = data + c * kChunk;
    float* res = residual != nullptr ? residual + c * kChunk : nullptr;
    if (len == kChunk) {
      Encode(codec, src, kChunk, res, out);
      return;
    }
    std::fill(std::copy_n(src, len, sc.tail.begin()), sc.tail.end(), 0.0f);
    float* tail_res = nullptr;
    if (res != nullptr) {
      std::fill(std::copy_n(res, len, sc.tail_residual.begin()), sc.tail_residual.end(), 0.0f);
      tail_res = sc.tail_residual.data();
    }
    Encode(codec, sc.tail.data(), kChunk, tail_res, out);
    if (res != nullptr) std::copy_n(sc.tail_residual.data(), len, res);
  };

  // Stage 1, reduce-scatter: run r = active chunks [r·per, (r+1)·per) goes to rank r. All-zero
  // bytes decode to +0 in every codec, so padding chunks are zero-filled.
  for (size_t v = 0; v < per * gs; ++v) {
    uint8_t* out = sc.send.data() + v * cb;
    if (v < m) {
      encode_chunk(sc.active[v], out);
    } else {
      std::memset(out, 0, cb);
    }
  }
  RM_RETURN_IF_ERROR(all_to_all(sc.send.data(), sc.recv.data(), bytes));
  for (size_t k = 0; k < per; ++k) {
    Decode(codec, sc.recv.data() + k * cb, kChunk, sc.sum.data() + k * kChunk);
    for (size_t r = 1; r < gs; ++r) {
      DecodeAdd(codec, sc.recv.data() + r * bytes + k * cb, kChunk, sc.sum.data() + k * kChunk);
    }
  }

  // Stage 2, all-gather of the encoded sums. The owner's rounding error of a sum goes into its
  // residual at that chunk's positions.
  uint8_t* mine = sc.send.data();  // stage 1's send buffer is free again
  for (size_t k = 0; k < per; ++k) {
    const size_t v = me * per + k;
    float* sum = sc.sum.data() + k * kChunk;
    if (residual == nullptr || v >= m) {
      Encode(codec, sum, kChunk, nullptr, mine + k * cb);
      continue;
    }
    std::fill(sc.tail_residual.begin(), sc.tail_residual.end(), 0.0f);
    Encode(codec, sum, kChunk, sc.tail_residual.data(), mine + k * cb);
    const size_t c = sc.active[v];
    float* res = residual + c * kChunk;
    for (size_t i = 0, len = chunk_len(c); i < len; ++i) res[i] += sc.tail_residual[i];
  }
  RM_RETURN_IF_ERROR(all_gather(mine, sc.recv.data(), bytes));
  for (size_t r = 0; r < gs; ++r) {
    for (size_t k = 0; k < per; ++k) {
      const size_t v = r * per + k;
      if (v >= m) break;
      const size_t c = sc.active[v];
      const size_t len = chunk_len(c);
      const uint8_t* in = sc.recv.data() + r * bytes + k * cb;
      if (len == kChunk) {
        Decode(codec, in, kChunk, data + c * kChunk);
      } else {
        Decode(codec, in, kChunk, sc.tail.data());
        std::copy_n(sc.tail.data(), len, data + c * kChunk);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
