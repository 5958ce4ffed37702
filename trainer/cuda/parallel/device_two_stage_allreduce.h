// TwoStageAllReduce (trainer/parallel/two_stage_allreduce.h) on device buffers: the codec-encoded
// reduce-scatter + all-gather with error feedback and zero-chunk skipping, encoding and decoding
// on the GPU (wire_codec_gpu.h) and moving the encoded bytes with a Communicator's kBytes
// AllToAll / AllGather on device memory (NcclCommunicator). Same chunks, same runs, same wire
// bytes and the same result bits on every rank as the CPU TwoStageAllReduce given the same
// inputs (device_two_stage_allreduce_gpu_test), so CPU and GPU ranks agree bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "trainer/comm/communicator.h"
#include "trainer/parallel/two_stage_allreduce.h"
#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer::cuda {

class DeviceTwoStageScratch;

// The sum over comm's ranks of every rank's data[0..n) (device), written into data on every
// rank, as TwoStageAllReduce(codec, comm.size(), comm.rank(), ...) computes it; `residual`
// (device, n floats, zero at first and kept across calls, or nullptr) carries the error
// feedback; `skip_zero_chunks` as there (every rank passes the same value).
//
// Ordering: the kernels and the collectives are enqueued on `stream` (a stream of comm's
// device), after the work already on it; data and residual must stay untouched by other
// streams until the call's work on `stream` is done. The call is BLOCKING: it waits for each
// collective's Work (Communicator::...Async(..., CommStream(stream))->Wait()), because the
// sizes of the exchange depend on data (with skipping, the active chunks: the gathered masks
// are copied to the host) and because data may be written only once both collectives
// succeeded: the final decode into data is enqueued after the all-gather completed, and is
// ordered on `stream` (synchronise it, or wait on an event, before reading data elsewhere).
// On a collective's error that error is returned, data is untouched and residual may already
// have been updated (as on the CPU); the communicator is then unusable (communicator.h).
// `stats` as TwoStageAllReduce's.
absl::Status DeviceTwoStageAllReduce(WireCodec codec, Communicator& comm, float* data, size_t n,
                                     float* residual, bool skip_zero_chunks,
                                     DeviceTwoStageScratch& scratch, cudaStream_t stream,
                                     TwoStageStats* stats = nullptr);

// Device buffers reused from call to call (grown when a call needs more, never shrunk), so a
// caller that keeps one allocates nothing per step once the sizes settle. Freed on destruction.
class DeviceTwoStageScratch {
 public:
  DeviceTwoStageScratch() = default;
  DeviceTwoStageScratch(const DeviceTwoStageScratch&) = delete;
  DeviceTwoStageScratch& operator=(const DeviceTwoStageScratch&) = delete;
  ~DeviceTwoStageScratch();

  // Device bytes held.
  size_t device_bytes() const;

 private:
  friend absl::Status DeviceTwoStageAllReduce(WireCodec, Communicator&, float*, size_t, float*,
                                              bool, DeviceTwoStageScratch&, cudaStream_t,
                                              TwoStageStats*);
  struct Buffer {
    void* p = nullptr;
    size_t bytes = 0;
  };
  // Makes b hold at least `bytes` (contents not kept).
  absl::Status Reserve(Buffer& b, size_t bytes, const char* what);

  Buffer send_, recv_, sum_, mask_, masks_, active_;
  std::vector<uint8_t> masks_host_;
  std::vector<uint32_t> active_host_;
};

}  // namespace ringmaster::trainer::cuda
