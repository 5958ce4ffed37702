// Streams and events. A stream is an in-order queue of work (kernel grids, async copies and
// sets, event records, waits on other streams' events). Two policies, chosen by
// CUDA_EMU_STREAMS (options.h):
//   eager (default)  work runs at the call: one legal order, and the fastest.
//   lazy             work is queued and runs only when something waits for it: the host
//                    (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a
//                    blocking cudaMemcpy/cudaMemset/cudaFree, a copy into pageable memory, a
//                    cuBLAS/NCCL call draining its stream) or another stream's queued
//                    cudaStreamWaitEvent. Also a legal order, and an adversarial one: a kernel
//                    on one stream that reads what another stream writes without an event
//                    between them reads the old bytes, and host code that reads a buffer
//                    before waiting for the copy into it reads the old bytes, so tests that
//                    compare results catch the missing dependency.
// The legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread) waits for every stream
// of the device and then runs at the call, in both policies. A device-wide wait drains the
// streams of the calling thread's current device, in creation order.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace cuda_emu {

// Queues `work` on `stream` (or runs it now: eager policy, legacy default stream).
void Submit(cudaStream_t stream, std::function<void()> work);
// Queues work that finishes over several calls: `work` returns true once done. A wait calls it
// until it is; a query (cudaStreamQuery, cudaEventQuery) calls it once and, if not done, leaves
// it at the head of the queue (not ready), as a GPU's query never blocks on unfinished work.
// Eager policy and the legacy stream: called at once until done.
void SubmitPolled(cudaStream_t stream, std::function<bool()> work);
// Runs everything queued on `stream` (every stream of the device for the legacy stream).
void Drain(cudaStream_t stream);
// Runs everything queued on every stream of the current device.
void DrainDevice();
// True for the handles that name the legacy default stream.
bool IsLegacyStream(cudaStream_t stream);

}  // namespace cuda_emu
