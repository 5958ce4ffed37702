// A StepEngine without a model, for testing TrainLoop (train_loop_test.cc): one scalar
// parameter w fitted by plain gradient descent to per-example targets derived from the example
// indices, with every call recorded. A world of one: its collectives are identities. Its
// checkpoints are real sharded checkpoints of one element (w and two moments).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/train/sharded_checkpoint.h"
#include "trainer/train/step_engine.h"

namespace ringmaster::trainer {

class FakeEngine : public StepEngine {
 public:
  // One training micro-batch as the engine saw it.
  struct MicroBatchCall {
    int64_t step = 0;               // optimizer steps completed before it
    std::vector<int64_t> examples;  // the batch's example indices (empty: EmptyMicroBatch)
    float loss_weight = 0;          // 0 for an empty micro-batch
    bool last_of_step = false;
    uint64_t dropout_seed = 0;
    bool operator==(const MicroBatchCall&) const = default;
  };

  // Example i's target: w is pulled towards it.
  static float Target(int64_t i) { return static_cast<float>(i % 7) / 7.0f; }

  int64_t num_params() const override { return 1; }

  void BeginStep() override {
    grad_ = 0;
    calls.push_back("begin");
  }
  absl::StatusOr<float> TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) override {
    calls.push_back("micro");
    micro_batches.push_back(
        {step_, batch.example_index, args.loss_weight, args.last_of_step, args.dropout_seed});
    if (on_micro) on_micro(step_);
    // loss = mean over the batch of (w - t)^2; d/dw = mean of 2 (w - t).
    double loss = 0, grad = 0;
    for (int64_t i : batch.example_index) {
      const double d = static_cast<double>(w_) - Target(i);
      loss += d * d;
      grad += 2 * d;
    }
    const double n = static_cast<double>(batch.example_index.size());
    grad_ += static_cast<double>(args.loss_weight) * grad / n;
    return static_cast<float>(loss / n);
  }
  void EmptyMicroBatch(bool last_of_step) override {
    calls.push_back("empty");
    micro_batches.push_back({step_, {}, 0.0f, last_of_step, 0});
    if (on_micro) on_micro(step_);
  }
  absl::StatusOr<StepTotals> FinishStep(double local_loss, double lr, double max_grad_norm,
                                        float flag) override {
    calls.push_back("finish");
    lrs.push_back(lr);
    StepTotals t{local_loss, std::abs(grad_), flag};
    if (step_ + 1 == nan_loss_at_step) t.loss = std::numeric_limits<double>::quiet_NaN();
    if (step_ + 1 == inf_grad_at_step) t.grad_norm = std::numeric_limits<double>::infinity();
    double g = grad_;
    if (max_grad_norm > 0 && std::abs(g) > max_grad_norm) g *= max_grad_norm / std::abs(g);
    w_ -= static_cast<float>(lr * g);
    m_ = 0.5f * m_ + static_cast<float>(g);
    v_ = 0.5f * v_ + static_cast<float>(g * g);
    ++step_;
    return t;
  }

  absl::StatusOr<ForwardOutput> EvalForward(const Batch& batch) override {
    calls.push_back("eval");
    eval_steps.push_back(step_);
    // Two logits per row; class 1 wins when w is above the row's target.
    logits_.clear();
    double loss = 0;
    for (int64_t i : batch.example_index) {
      const double d = static_cast<double>(w_) - Target(i);
      loss += d * d;
      logits_.push_back(0.0f);
      logits_.push_back(static_cast<float>(d));
    }
    return ForwardOutput{static_cast<float>(loss / static_cast<double>(batch.batch_size)), logits_};
  }
  void EmptyEvalForward() override { calls.push_back("empty_eval"); }

  absl::Status status() const override { return absl::OkStatus(); }
  absl::Status AllReduceSum(std::vector<float>*) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }

  absl::StatusOr<uint64_t> SaveCheckpoint(const std::string& output_dir,
                                          const CheckpointMeta& position, int keep) override {
    calls.push_back(absl::StrCat("save@", position.step));
    CheckpointMeta meta = position;
    meta.total = 1;
    meta.fingerprint = "fake-engine";
    meta.sharding = "none";
    const ShardRanges mine{{{0, 1}}};
    RM_RETURN_IF_ERROR(SaveShardedCheckpoint(output_dir, 0, 1, meta, mine, &w_, &m_, &v_, keep,
                                             [] { return absl::OkStatus(); }));
    return 3 * sizeof(float);
  }
  absl::StatusOr<LoadedShard> ReadCheckpoint(const std::string& dir) const override {
    return LoadShardedCheckpoint(dir, 1, "fake-engine", ShardRanges{{{0, 1}}});
  }
  absl::Status LoadCheckpoint(const LoadedShard& shard) override {
    calls.push_back(absl::StrCat("load@", shard.meta.step));
    w_ = shard.params[0];
    m_ = shard.exp_avg[0];
    v_ = shard.exp_avg_sq[0];
    step_ = shard.meta.step;
    return absl::OkStatus();
  }

  absl::Status GatherFullParams(std::vector<float>* out) override {
    calls.push_back("gather");
    *out = {w_};
    return absl::OkStatus();
  }
  EngineFigures figures() const override { return EngineFigures{12, 0, CommTotals{}, device}; }
  std::optional<DeviceFigures> device;  // what figures() reports as a GPU engine's

  float w() const { return w_; }

  // Settings.
  int64_t nan_loss_at_step = -1;  // FinishStep of this step (1-based) reports a NaN loss
  int64_t inf_grad_at_step = -1;  // ... an infinite gradient norm
  std::function<void(int64_t step)> on_micro;  // called in each micro-batch (e.g. to stop)

  // Records.
  std::vector<std::string> calls;
  std::vector<MicroBatchCall> micro_batches;
  std::vector<int64_t> eval_steps;  // step count at each non-empty evaluation forward
  std::vector<double> lrs;

 private:
  float w_ = 0.5f, m_ = 0, v_ = 0;
  double grad_ = 0;
  int64_t step_ = 0;
  std::vector<float> logits_;
};

}  // namespace ringmaster::trainer
