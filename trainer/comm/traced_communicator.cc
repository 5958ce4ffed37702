#include "trainer/comm/traced_communicator.h"

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

template <typename Fn>
absl::Status TracedCommunicator::Trace(Collective op, Fn&& fn) {
  const uint64_t seq = counter_->fetch_add(1, std::memory_order_relaxed) + 1;
  observer_->OnEnter(seq, op);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = fn();
  observer_->OnLeave(
      seq, op, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (s.ok()) return s;
  // The backend numbers operations per communicator from 0; the coordinator's stall diagnosis
  // and `ringmaster status` use this rank-wide number. Say both, so that they can be matched.
  return absl::Status(
      s.code(), absl::StrCat("in collective #", seq, " (", CollectiveName(op),
                             ", as `ringmaster status` numbers it): ", std::string(s.message())));
}

absl::Status TracedCommunicator::AllReduceSum(float* data, size_t n) {
  return Trace(Collective::kAllReduceSum, [&] { return inner_->AllReduceSum(data, n); });
}
absl::Status TracedCommunicator::ReduceScatterSum(const float* in, float* out, size_t n) {
  return Trace(Collective::kReduceScatterSum, [&] { return inner_->ReduceScatterSum(in, out, n); });
}
absl::Status TracedCommunicator::AllGather(const float* in, float* out, size_t n) {
  return Trace(Collective::kAllGather, [&] { return inner_->AllGather(in, out, n); });
}
absl::Status TracedCommunicator::AllToAll(const void* in, void* out, size_t bytes) {
  return Trace(Collective::kAllToAll, [&] { return inner_->AllToAll(in, out, bytes); });
}
absl::Status TracedCommunicator::AllGatherBytes(const void* in, void* out, size_t bytes) {
  return Trace(Collective::kAllGatherBytes, [&] { return inner_->AllGatherBytes(in, out, bytes); });
}
absl::Status TracedCommunicator::Broadcast(float* data, size_t n, int root) {
  return Trace(Collective::kBroadcast, [&] { return inner_->Broadcast(data, n, root); });
}
absl::Status TracedCommunicator::Barrier() {
  return Trace(Collective::kBarrier, [&] { return inner_->Barrier(); });
}

}  // namespace ringmaster::trainer
