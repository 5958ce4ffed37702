// Communicator over NCCL: the GPU backend for multi-rank training, one rank per CUDA device.
//
// Built only when nvcc and NCCL (nccl.h + libnccl) are found; targets that link
// `ringmaster_nccl_communicator` see the compile definition RINGMASTER_HAVE_NCCL=1. The header
// itself needs neither CUDA nor NCCL headers.
//
// Differences from the interface contract in trainer/comm/communicator.h (which otherwise holds):
//  - Every pointer passed to an operation is a DEVICE pointer (cudaMalloc'd on this
//    communicator's device, or managed memory). Host pointers, pageable or pinned, and
//    pointers into another device's memory are rejected with InvalidArgument before anything
//    is enqueued.
//  - Operations run on the communicator's own stream (created with cudaStreamNonBlocking, so
//    they overlap compute on other streams) and each synchronises that stream before returning:
//    on OK the result is in place and visible to every stream. The caller must make sure the
//    input is ready (e.g. cudaStreamSynchronize / an event on the producing stream) before the
//    call; CommQueue (trainer/comm/comm_queue.h) provides asynchrony on top.
//  - Argument errors (null/host/overlapping buffers, a bad Broadcast root) return
//    InvalidArgument without consuming a sequence number or poisoning the communicator, as in
//    the Gloo backend; the other ranks, which did issue the op, will then time out.
//
// Timeouts: with NCCL >= 2.14 the communicator is created non-blocking (ncclConfig_t::blocking
// = 0), so initialisation and every collective are polled against the deadline and aborted
// (ncclCommAbort) when it passes: DeadlineExceeded naming the op and its sequence number. With
// older NCCL, initialisation is blocking (ncclCommInitRank) and cannot be bounded: a rank that
// never joins hangs Create. Collectives are bounded in both cases.
//
// Not thread-safe: one caller at a time (CommQueue's worker serialises). Any thread may call:
// each operation first makes the communicator's device current on the calling thread (and
// leaves it so).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/store.h"

namespace ringmaster::trainer {

class NcclCommunicator {
 public:
  // Bootstraps rank `rank` of `size` on CUDA device `device`: rank 0 creates the NCCL unique id
  // and publishes it in `store` under "nccl_unique_id" (raw bytes); the other ranks read it
  // from there. `timeout` bounds the rendezvous, the NCCL initialisation and each later
  // collective. Each rank must use a distinct device (NCCL does not allow two ranks of one
  // communicator on the same GPU).
  //
  // `store` must be fresh for this communicator (use PrefixStore to reuse one backing store
  // across generations); it is only used during Create.
  //
  // Destroying the communicator flushes it (ncclCommFinalize, bounded by `timeout`, then
  // ncclCommDestroy; ncclCommAbort past the deadline or after a failure), so the destructor
  // may block for up to `timeout` when peers are gone.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(Store& store, int rank, int size,
                                                              int device, absl::Duration timeout);
};

}  // namespace ringmaster::trainer
