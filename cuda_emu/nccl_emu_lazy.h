// The NCCL stand-in under lazy streams (CUDA_EMU_STREAMS=lazy, streams.h): a collective or a
// group of point-to-point calls becomes work queued on the call's stream, which runs when that
// stream is drained (a wait on an event recorded after it, a stream synchronize, ...) and
// finishes only when every rank's stream has reached the same collective. At the call nothing
// is read or written, so a consumer that reads a gather's or a reduction's output without
// waiting for the communication stream reads the bytes from before it; eagerly (the default)
// the collective runs at the call and such a missing wait goes unseen.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "cuda_emu/nccl_emu_comm.h"

namespace cuda_emu::nccl {

// Whether calls on `stream` are queued on it (lazy streams, a stream other than the legacy one).
bool QueuedOnStream(cudaStream_t stream);

// Queues `ops` of communicator `c` on `stream` (streams.h SubmitPolled): when the stream
// reaches them they are issued together (as one group), their timeouts counted from then, and
// the stream goes no further until they finish: a wait drives them to the end, a query
// (cudaEventQuery, cudaStreamQuery) advances them without blocking. An error is kept as the
// communicator's (ncclCommGetAsyncError, every later call) and printed; work of a communicator
// destroyed or aborted meanwhile is dropped.
void EnqueueOnStream(ncclComm* c, std::vector<std::unique_ptr<Op>> ops, cudaStream_t stream);

}  // namespace cuda_emu::nccl
