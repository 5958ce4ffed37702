// A Communicator decorator that tells an observer which collective a rank is in: the number and
// name of every collective when it is entered, and how long it took when it is left. The hang
// diagnosis rests on it: all ranks issue the same collectives in the same order, so a rank whose
// count is behind the others' is the one holding them up.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/collective_observer.h"
#include "trainer/comm/communicator.h"

namespace ringmaster::trainer {

class TracedCommunicator : public Communicator {
 public:
  // `counter` numbers collectives across the communicators of one rank (world, intra-node,
  // inter-node): every rank issues the same mix in the same order, so the numbers agree.
  // `inner`, `observer` and `counter` must outlive this.
  TracedCommunicator(Communicator* inner, CollectiveObserver* observer,
                     std::atomic<uint64_t>* counter)
      : inner_(inner), observer_(observer), counter_(counter) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllReduceSum(float* data, size_t n) override;
  absl::Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank) override;
  absl::Status AllGather(const float* in, float* out, size_t n_per_rank) override;
  absl::Status AllToAll(const void* in, void* out, size_t bytes_per_rank) override;
  absl::Status AllGatherBytes(const void* in, void* out, size_t bytes_per_rank) override;
  absl::Status Broadcast(float* data, size_t n, int root) override;
  absl::Status Barrier() override;

 private:
  template <typename Fn>
  absl::Status Trace(Collective op, Fn&& fn);

  Communicator* inner_;
  CollectiveObserver* observer_;
  std::atomic<uint64_t>* counter_;
};

}  // namespace ringmaster::trainer
