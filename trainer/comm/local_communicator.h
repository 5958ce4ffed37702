// The communicator of a world of one: every collective is a copy (or nothing). Lets the
// single-process trainer run the same data-parallel code path without any transport.
#pragma once

#include <algorithm>
#include <cstring>

#include "trainer/comm/communicator.h"

namespace ringmaster::trainer {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status ReduceScatterSum(const float* in, float* out, size_t n) override {
    std::copy(in, in + n, out);
    return absl::OkStatus();
  }
  absl::Status AllGather(const float* in, float* out, size_t n) override {
    std::copy(in, in + n, out);
    return absl::OkStatus();
  }
  absl::Status AllToAll(const void* in, void* out, size_t bytes) override {
    if (bytes > 0) std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
  absl::Status AllGatherBytes(const void* in, void* out, size_t bytes) override {
    if (bytes > 0) std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
  absl::Status Broadcast(float*, size_t, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace ringmaster::trainer
