// Collectives as stream work under lazy streams (nccl_emu_lazy.h).
#include "trainer/cuda/emu/nccl_emu_lazy.h"

#include <memory>
#include <utility>
#include <vector>

#include "trainer/cuda/emu/options.h"
#include "trainer/cuda/emu/streams.h"

namespace cuda_emu::nccl {

bool QueuedOnStream(cudaStream_t stream) {
  return GetOptions().lazy_streams && !IsLegacyStream(stream);
}

void EnqueueOnStream(ncclComm* c, std::vector<std::unique_ptr<Op>> ops, cudaStream_t stream) {
  // std::function needs a copyable callable: the ops travel in a shared holder.
  auto held = std::make_shared<std::vector<std::unique_ptr<Op>>>(std::move(ops));
  Submit(stream, [c, held] {
    if (c->async_error != ncclSuccess) return;  // failed earlier: the op never runs
    for (auto& op : *held) {
      op->start = Clock::now();  // the timeout runs from when the stream reached it
      c->pending.push_back(std::move(op));
    }
    // Until every rank's stream has reached it (or a peer is gone, or the timeout): Drive
    // records a failure with the communicator (Fail), which later calls return.
    (void)Drive({c});
  });
}

}  // namespace cuda_emu::nccl
