// What both data-parallel engines (data_parallel.h, trainer/cuda/parallel/cuda_data_parallel.h)
// keep about the pass the model is running over them (UnitAccess): which micro-batch, forward or
// backward, and the first failure inside it (UnitAccess cannot return one), with the empty
// passes of a rank without samples.
#pragma once

#include <mutex>

#include "absl/status/status.h"
#include "trainer/model/bert_model.h"

namespace ringmaster::trainer {

class UnitPass : public UnitAccess<float> {
 public:
  // Per micro-batch: BeginMicroBatch, the model's Forward, BeginBackward, its Backward.
  void BeginMicroBatch(bool last_of_step, bool training) {
    last_micro_ = last_of_step;
    training_ = training;
    backward_ = false;
  }
  void BeginBackward() { backward_ = true; }
  // The same collectives as a Forward + Backward with zero gradients (a rank without samples).
  void RunEmptyMicroBatch(int num_units) {
    backward_ = false;
    RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/true, [this] { backward_ = true; });
  }
  // The same collectives as a Forward (evaluation on a rank without rows left).
  void RunEmptyForward(int num_units) {
    backward_ = false;
    RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/false, [] {});
  }

  // First failure of a collective issued inside a pass.
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

 protected:
  void Fail(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_.ok()) failure_ = s;
  }

  bool training_ = false, last_micro_ = true, backward_ = false;

 private:
  mutable std::mutex mu_;
  absl::Status failure_;  // guarded by mu_
};

}  // namespace ringmaster::trainer
