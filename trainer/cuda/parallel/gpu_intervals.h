// Intervals of GPU time, each between two timing events recorded on a stream, read without
// making the host wait inside a step: Collect reads them where the host waits for the stream
// anyway (the step's readback). CudaDataParallel times its collectives with them, and the
// compute stream's stalls on the communication stream (TimedWait).
//
// A stall: the event recorded on the waiting stream just before its cudaStreamWaitEvent
// completes when that stream's earlier work has, the one just after when the wait is over, so on
// a GPU their elapsed time is how long the stream sat idle for the other one (about zero when
// the other stream was already past the event). Under the emulator event times are host times:
// the plumbing is tested there, the figures mean nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer::cuda {

class GpuIntervals {
 public:
  GpuIntervals() = default;
  ~GpuIntervals();
  GpuIntervals(const GpuIntervals&) = delete;
  GpuIntervals& operator=(const GpuIntervals&) = delete;

  // Records a new interval's first event on `stream`; the interval's index.
  absl::StatusOr<size_t> Begin(cudaStream_t stream);
  // Records interval `i`'s second event on `stream`.
  absl::Status End(size_t i, cudaStream_t stream);
  // `waiter` waits for `event` (cudaStreamWaitEvent) between the two events of a new interval
  // on `waiter`: the interval is the stall. The wait is enqueued even when timing fails.
  absl::Status TimedWait(cudaStream_t waiter, cudaEvent_t event);

  // Intervals recorded since the last Collect, and interval i's second event (tests compare it
  // with other streams' events).
  size_t size() const { return used_; }
  cudaEvent_t end_event(size_t i) const { return events_[i].second; }

  // Each interval's length in seconds, in the order they were begun; the events are then reused
  // for the next ones. Waits for every second event: call where the host has waited for their
  // streams already, or pays that wait.
  absl::StatusOr<std::vector<double>> Collect();

 private:
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events_;  // created on demand, kept
  size_t used_ = 0;
};

}  // namespace ringmaster::trainer::cuda
