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
  // `inner`, `observer` and `counter` must outlive this and every Work it returns.
  //
  // OnEnter is reported when an operation is issued; OnLeave when its Work is first seen done
  // (by Wait, or IsDone returning true). For a backend that completes on the calling thread
  // (Gloo) both happen before the call returns; for a stream-ordered one (NCCL) a Work nobody
  // waits for leaves its collective "entered", which is what the hang diagnosis should see.
  TracedCommunicator(Communicator* inner, CollectiveObserver* observer,
                     std::atomic<uint64_t>* counter)
      : inner_(inner), observer_(observer), counter_(counter) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Work> AllReduceSumAsync(void* data, size_t count, DataType type,
                                          CommStream stream) override;
  std::shared_ptr<Work> ReduceScatterSumAsync(const void* in, void* out, size_t count_per_rank,
                                              DataType type, CommStream stream) override;
  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count_per_rank,
                                       DataType type, CommStream stream) override;
  std::shared_ptr<Work> AllToAllAsync(const void* in, void* out, size_t count_per_rank,
                                      DataType type, CommStream stream) override;
  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                       CommStream stream) override;
  std::shared_ptr<Work> BarrierAsync(CommStream stream) override;

 private:
  template <typename Fn>
  std::shared_ptr<Work> Trace(Collective op, Fn&& enqueue);

  Communicator* inner_;
  CollectiveObserver* observer_;
  std::atomic<uint64_t>* counter_;
};

}  // namespace ringmaster::trainer
