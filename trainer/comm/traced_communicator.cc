#include "trainer/comm/traced_communicator.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

namespace {

// Reports OnLeave once, when the inner Work is first seen done, and prefixes a failure with the
// rank-wide collective number.
class TracedWork final : public Work {
 public:
  TracedWork(std::shared_ptr<Work> inner, CollectiveObserver* observer, uint64_t seq, Collective op,
             std::chrono::steady_clock::time_point start)
      : inner_(std::move(inner)), observer_(observer), seq_(seq), op_(op), start_(start) {}

  absl::Status Wait() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return status_;
    }
    return Finish(inner_->Wait());
  }

  bool IsDone() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return true;
    }
    if (!inner_->IsDone()) return false;
    Finish(inner_->Wait()).IgnoreError();  // kept in status_
    return true;
  }

 private:
  absl::Status Finish(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return status_;  // Another waiter finished first.
    observer_->OnLeave(
        seq_, op_,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    // The backend numbers operations per communicator from 0; the coordinator's stall diagnosis
    // and `ringmaster status` use this rank-wide number. Say both, so that they can be matched.
    status_ = s.ok() ? s
                     : absl::Status(s.code(),
                                    absl::StrCat("in collective #", seq_, " (", CollectiveName(op_),
                                                 ", as `ringmaster status` numbers it): ",
                                                 std::string(s.message())));
    done_ = true;
    return status_;
  }

  const std::shared_ptr<Work> inner_;
  CollectiveObserver* const observer_;
  const uint64_t seq_;
  const Collective op_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  bool done_ = false;
  absl::Status status_;
};

}  // namespace

template <typename Fn>
std::shared_ptr<Work> TracedCommunicator::Trace(Collective op, Fn&& enqueue) {
  const uint64_t seq = counter_->fetch_add(1, std::memory_order_relaxed) + 1;
  observer_->OnEnter(seq, op);
  const auto start = std::chrono::steady_clock::now();
  auto work = std::make_shared<TracedWork>(enqueue(), observer_, seq, op, start);
  work->IsDone();  // A synchronous backend's Work is done: report the leave now, in order.
  return work;
}

std::shared_ptr<Work> TracedCommunicator::AllReduceSumAsync(void* data, size_t count, DataType type,
                                                            CommStream stream) {
  return Trace(Collective::kAllReduceSum,
               [&] { return inner_->AllReduceSumAsync(data, count, type, stream); });
}
std::shared_ptr<Work> TracedCommunicator::ReduceScatterSumAsync(const void* in, void* out,
                                                                size_t count, DataType type,
                                                                CommStream stream) {
  return Trace(Collective::kReduceScatterSum,
               [&] { return inner_->ReduceScatterSumAsync(in, out, count, type, stream); });
}
std::shared_ptr<Work> TracedCommunicator::AllGatherAsync(const void* in, void* out, size_t count,
                                                         DataType type, CommStream stream) {
  return Trace(type == DataType::kBytes ? Collective::kAllGatherBytes : Collective::kAllGather,
               [&] { return inner_->AllGatherAsync(in, out, count, type, stream); });
}
std::shared_ptr<Work> TracedCommunicator::AllToAllAsync(const void* in, void* out, size_t count,
                                                        DataType type, CommStream stream) {
  return Trace(Collective::kAllToAll,
               [&] { return inner_->AllToAllAsync(in, out, count, type, stream); });
}
std::shared_ptr<Work> TracedCommunicator::BroadcastAsync(void* data, size_t count, DataType type,
                                                         int root, CommStream stream) {
  return Trace(Collective::kBroadcast,
               [&] { return inner_->BroadcastAsync(data, count, type, root, stream); });
}
std::shared_ptr<Work> TracedCommunicator::BarrierAsync(CommStream stream) {
  return Trace(Collective::kBarrier, [&] { return inner_->BarrierAsync(stream); });
}

}  // namespace ringmaster::trainer
