// Collectives as stream work under lazy streams (nccl_emu_lazy.h).
#include "cuda_emu/nccl_emu_lazy.h"

#include <memory>
#include <utility>
#include <vector>

#include "cuda_emu/options.h"
#include "cuda_emu/streams.h"

namespace cuda_emu::nccl {

bool QueuedOnStream(cudaStream_t stream) {
  return GetOptions().lazy_streams && !IsLegacyStream(stream);
}

void EnqueueOnStream(ncclComm* c, std::vector<std::unique_ptr<Op>> ops, cudaStream_t stream) {
  // std::function needs a copyable callable: the ops travel in a shared holder, with the
  // communicator's liveness (it may be aborted and freed while the work is still queued).
  auto held = std::make_shared<std::vector<std::unique_ptr<Op>>>(std::move(ops));
  SubmitPolled(stream, [c, alive = c->alive, held, issued = false]() mutable {
    if (!alive->load(std::memory_order_acquire)) return true;  // aborted: dropped
    if (!issued) {
      issued = true;
      if (c->async_error != ncclSuccess) return true;  // failed earlier: never runs
      for (auto& op : *held) {
        op->start = Clock::now();  // the timeout runs from when the stream reached it
        c->pending.push_back(std::move(op));
      }
    }
    // Done when every rank's stream has reached it, or on an error (kept by Fail as the
    // communicator's: ncclCommGetAsyncError and every later call return it).
    return ProgressComm(c) != ncclInProgress;
  });
}

}  // namespace cuda_emu::nccl
