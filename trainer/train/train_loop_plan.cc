// The training loop's plan: each rank's slice of a global batch (equal or weighted shares), the
// number of steps and micro-batches, and the learning-rate schedule. Part of TrainLoop's
// interface (train_loop.h); no TrainLoop state.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "trainer/train/train_loop.h"

namespace ringmaster::trainer {

std::pair<size_t, size_t> SliceOf(const LoopWorld& world, size_t n, int rank) {
  const std::vector<double>& weights = world.rank_weights;
  if (weights.empty()) {
    const size_t w = static_cast<size_t>(world.world_size), r = static_cast<size_t>(rank);
    return {n * r / w, n * (r + 1) / w};
  }
  // Proportional to the weights: boundaries at the rounded cumulative shares.
  double total = 0, before = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += weights[i];
    if (static_cast<int>(i) < rank) before += weights[i];
  }
  auto at = [&](double cum) {
    return std::min(n, static_cast<size_t>(std::llround(static_cast<double>(n) * cum / total)));
  };
  return {at(before), at(before + weights[rank])};
}

TrainPlan MakeTrainPlan(const JobSpec& job, const LoopWorld& world,
                        const std::vector<uint32_t>& train_keys) {
  TrainPlan p;
  // Every rank runs the same number of micro-batches: enough for the largest share.
  size_t largest = 0;
  for (int r = 0; r < world.world_size; ++r) {
    const auto [b, e] = SliceOf(world, static_cast<size_t>(job.train.global_batch_size), r);
    largest = std::max(largest, e - b);
  }
  const size_t mbs = static_cast<size_t>(job.train.micro_batch_size);
  p.accumulation = std::max<int>(1, static_cast<int>((largest + mbs - 1) / mbs));
  p.steps_per_epoch = static_cast<int64_t>(
      PlanEpoch(train_keys, job.train.global_batch_size, job.data.shuffle, job.train.seed, 0)
          .size());
  p.total_steps =
      job.train.max_steps > 0 ? job.train.max_steps : p.steps_per_epoch * job.train.epochs;
  p.schedule.kind = job.train.lr_schedule;
  p.schedule.base_lr = job.train.lr;
  p.schedule.total_steps = p.total_steps;
  p.schedule.lr_end = job.train.lr_end;
  p.schedule.power = job.train.lr_power;
  p.schedule.warmup_steps =
      WarmupSteps(job.train.warmup_steps, job.train.warmup_ratio, p.total_steps);
  return p;
}

std::vector<std::vector<int64_t>> ShareOf(const JobSpec& job, const LoopWorld& world,
                                          const TrainPlan& plan,
                                          const std::vector<int64_t>& global) {
  const auto [b, e] = SliceOf(world, global.size(), world.rank);
  std::vector<std::vector<int64_t>> micro(plan.accumulation);
  const size_t mbs = static_cast<size_t>(job.train.micro_batch_size);
  for (size_t i = b, k = 0; i < e; i += mbs, ++k) {
    // Rounding can leave a weighted share a few rows over `accumulation` micro-batches: the
    // last micro-batch takes them.
    std::vector<int64_t>& dst = micro[std::min<size_t>(k, micro.size() - 1)];
    dst.insert(dst.end(), global.begin() + i, global.begin() + std::min(e, i + mbs));
  }
  return micro;
}

}  // namespace ringmaster::trainer
