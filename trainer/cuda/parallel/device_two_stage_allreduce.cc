// The codec-encoded two-stage all-reduce on device buffers (device_two_stage_allreduce.h): the
// CPU TwoStageAllReduce's steps, each a kernel of wire_codec.cu, around the communicator's byte
// collectives.
#include "trainer/cuda/parallel/device_two_stage_allreduce.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/cuda/cuda_status.h"
#include "trainer/cuda/kernels/wire_codec.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr size_t kChunk = kInt8BlockSize;  // the unit of skipping and encoding, as on the CPU

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

DeviceTwoStageScratch::~DeviceTwoStageScratch() {
  for (Buffer* b : {&send_, &recv_, &sum_, &mask_, &masks_, &active_}) {
    if (b->p != nullptr) cudaFree(b->p);
  }
}

size_t DeviceTwoStageScratch::device_bytes() const {
  return send_.bytes + recv_.bytes + sum_.bytes + mask_.bytes + masks_.bytes + active_.bytes;
}

absl::Status DeviceTwoStageScratch::Reserve(Buffer& b, size_t bytes, const char* what) {
  if (b.bytes >= bytes) return absl::OkStatus();
  if (b.p != nullptr) {
    const cudaError_t e = cudaFree(b.p);
    b.p = nullptr;
    b.bytes = 0;
    RM_CUDA_RETURN_IF_ERROR(e);
  }
  const absl::Status s = CudaStatus(cudaMalloc(&b.p, bytes), "cudaMalloc", __FILE__, __LINE__);
  if (!s.ok()) {
    b.p = nullptr;
    return absl::Status(s.code(), absl::StrCat("DeviceTwoStageAllReduce: ", bytes,
                                               " bytes of scratch for ", what, ": ", s.message()));
  }
  b.bytes = bytes;
  return absl::OkStatus();
}

absl::Status DeviceTwoStageAllReduce(WireCodec codec, Communicator& comm, float* data, size_t n,
                                     float* residual, bool skip, DeviceTwoStageScratch& sc,
                                     cudaStream_t stream, TwoStageStats* stats) {
  if (n > 0 && data == nullptr) {
    return absl::InvalidArgumentError("DeviceTwoStageAllReduce: null data");
  }
  const int g = comm.size();
  const size_t gs = static_cast<size_t>(g);
  const size_t me = static_cast<size_t>(comm.rank());
  const size_t chunks = CeilDiv(n, kChunk);
  const CommStream on(stream);

  // Which chunks take part: all of them (active == nullptr), or those some rank has a non-zero
  // value in: each rank's mask, gathered, OR-ed on the host (the count sizes the exchange).
  const uint32_t* active = nullptr;
  size_t m = chunks;
  if (skip) {
    const size_t mask_bytes = WireChunkMaskBytes(n);
    sc.active_host_.clear();
    if (mask_bytes > 0) {
      RM_RETURN_IF_ERROR(sc.Reserve(sc.mask_, mask_bytes, "the chunk mask"));
      RM_RETURN_IF_ERROR(sc.Reserve(sc.masks_, mask_bytes * gs, "the gathered masks"));
      auto* mask = static_cast<uint8_t*>(sc.mask_.p);
      auto* masks = static_cast<uint8_t*>(sc.masks_.p);
      RM_CUDA_RETURN_IF_ERROR(WireChunkNonZeroMask(data, residual, n, mask, stream));
      RM_RETURN_IF_ERROR(
          comm.AllGatherAsync(mask, masks, mask_bytes, DataType::kBytes, on)->Wait());
      sc.masks_host_.resize(mask_bytes * gs);
      RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sc.masks_host_.data(), masks, mask_bytes * gs,
                                              cudaMemcpyDeviceToHost, stream));
      RM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      for (size_t r = 1; r < gs; ++r) {
        for (size_t i = 0; i < mask_bytes; ++i) {
          sc.masks_host_[i] |= sc.masks_host_[r * mask_bytes + i];
        }
      }
      for (size_t c = 0; c < chunks; ++c) {
        if ((sc.masks_host_[c / 8] >> (c % 8)) & 1u) {
          sc.active_host_.push_back(static_cast<uint32_t>(c));
        }
      }
    }
    m = sc.active_host_.size();
    if (m > 0) {
      RM_RETURN_IF_ERROR(sc.Reserve(sc.active_, m * sizeof(uint32_t), "the active chunk list"));
      // From pageable memory: the host vector is staged before the call returns.
      RM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sc.active_.p, sc.active_host_.data(),
                                              m * sizeof(uint32_t), cudaMemcpyHostToDevice,
                                              stream));
      active = static_cast<const uint32_t*>(sc.active_.p);
    }
  }
  if (stats != nullptr) {
    stats->chunks = chunks;
    stats->active_chunks = m;
    stats->wire_bytes = TwoStageWireBytes(codec, m, chunks, g, skip);
  }
  if (m == 0) return absl::OkStatus();  // zero everywhere: the sum is data as it is

  const size_t per = CeilDiv(m, gs);              // chunks per rank's run
  const size_t cb = EncodedBytes(codec, kChunk);  // bytes per encoded chunk
  const size_t bytes = per * cb;                  // bytes per rank's run
  RM_RETURN_IF_ERROR(sc.Reserve(sc.send_, bytes * gs, "the send buffer"));
  RM_RETURN_IF_ERROR(sc.Reserve(sc.recv_, bytes * gs, "the receive buffer"));
  RM_RETURN_IF_ERROR(sc.Reserve(sc.sum_, per * kChunk * sizeof(float), "the run's sums"));
  auto* send = static_cast<uint8_t*>(sc.send_.p);
  auto* recv = static_cast<uint8_t*>(sc.recv_.p);
  auto* sum = static_cast<float*>(sc.sum_.p);

  // Stage 1, reduce-scatter: run r = active chunks [r·per, (r+1)·per) to rank r (zero padding).
  RM_CUDA_RETURN_IF_ERROR(
      WireEncodeChunks(codec, data, n, residual, active, m, per * gs, send, stream));
  RM_RETURN_IF_ERROR(comm.AllToAllAsync(send, recv, bytes, DataType::kBytes, on)->Wait());
  RM_CUDA_RETURN_IF_ERROR(WireSumRuns(codec, recv, g, per, bytes, sum, stream));

  // Stage 2, all-gather of the encoded sums; the owner keeps their rounding error.
  RM_CUDA_RETURN_IF_ERROR(
      WireEncodeOwnedSums(codec, sum, per, me * per, m, active, n, residual, send, stream));
  RM_RETURN_IF_ERROR(comm.AllGatherAsync(send, recv, bytes, DataType::kBytes, on)->Wait());
  RM_CUDA_RETURN_IF_ERROR(WireDecodeChunks(codec, recv, m, active, n, data, stream));
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer::cuda
