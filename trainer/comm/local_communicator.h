// The communicator of a world of one: every collective is a copy (or nothing), on the calling
// thread, in host memory. Lets the single-process trainer run the same data-parallel code path
// without any transport. It takes only the default stream (a CUDA rank alone uses an NCCL
// communicator of one instead; see DistContext).
#pragma once

#include <cstring>

#include "absl/strings/str_format.h"
#include "trainer/comm/communicator.h"

namespace ringmaster::trainer {

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  std::shared_ptr<Work> AllReduceSumAsync(void*, size_t, DataType type,
                                          CommStream stream) override {
    absl::Status s = CheckStream("AllReduceSum", stream);
    if (s.ok()) s = CheckSummable("Local", "AllReduceSum", 0, type);
    return MakeCompletedWork(s);
  }
  std::shared_ptr<Work> ReduceScatterSumAsync(const void* in, void* out, size_t count,
                                              DataType type, CommStream stream) override {
    absl::Status s = CheckStream("ReduceScatterSum", stream);
    if (s.ok()) s = CheckSummable("Local", "ReduceScatterSum", 0, type);
    if (s.ok()) Copy(in, out, count, type);
    return MakeCompletedWork(s);
  }
  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count, DataType type,
                                       CommStream stream) override {
    absl::Status s = CheckStream("AllGather", stream);
    if (s.ok()) Copy(in, out, count, type);
    return MakeCompletedWork(s);
  }
  std::shared_ptr<Work> AllToAllAsync(const void* in, void* out, size_t count, DataType type,
                                      CommStream stream) override {
    absl::Status s = CheckStream("AllToAll", stream);
    if (s.ok()) Copy(in, out, count, type);
    return MakeCompletedWork(s);
  }
  std::shared_ptr<Work> BroadcastAsync(void*, size_t, DataType, int root,
                                       CommStream stream) override {
    absl::Status s = CheckStream("Broadcast", stream);
    if (s.ok() && root != 0) {
      s = absl::InvalidArgumentError(
          absl::StrFormat("Local Broadcast on rank 0: root %d outside [0, 1)", root));
    }
    return MakeCompletedWork(s);
  }
  std::shared_ptr<Work> BarrierAsync(CommStream stream) override {
    return MakeCompletedWork(CheckStream("Barrier", stream));
  }

 private:
  static absl::Status CheckStream(const char* op, CommStream stream) {
    if (stream.is_default()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "Local %s: the world of one runs on the calling thread and takes no device stream", op));
  }
  static void Copy(const void* in, void* out, size_t count, DataType type) {
    if (count > 0) std::memcpy(out, in, count * DataTypeSize(type));
  }
};

}  // namespace ringmaster::trainer
