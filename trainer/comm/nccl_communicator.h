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
//  - Operations are enqueued on the CommStream given (a cudaStream_t of this communicator's
//    device) or, for a default CommStream, on the communicator's own stream (created with
//    cudaStreamNonBlocking, so it overlaps compute on other streams). Nothing is synchronised
//    when an operation is issued: it runs after the work already on its stream, later work on
//    that stream sees its result, and its Work completes on a CUDA event recorded after it.
//    Work::Wait polls that event and NCCL's asynchronous error state; past the collective
//    timeout (counted from the later of the issue and the wait), or on an error, it aborts the
//    NCCL communicator and returns a Status naming the operation and its sequence number. The
//    blocking forms (Communicator::AllReduceSum(...) etc.) use the communicator's own stream,
//    so the caller must make sure the input is ready (e.g. an event on the producing stream)
//    before the call; CommQueue (trainer/comm/comm_queue.h) provides host-side asynchrony.
//  - Sums of bf16 (NCCL >= 2.10) and fp16 are NCCL's: rounded as its algorithm combines the
//    ranks' values, not once at the end as Gloo does. Gathers, all-to-all and broadcast move
//    bytes, whatever the type.
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
// Not thread-safe to issue from two threads at once (CommQueue's worker serialises); a Work may
// be waited for on any thread. Any thread may issue: each operation first makes the
// communicator's device current on the calling thread (and leaves it so). A Work may outlive its
// communicator: destruction flushes NCCL, and the Work then completes with its event.
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
