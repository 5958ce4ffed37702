// Gradient buckets of no_shard (DDP) data parallelism: consecutive units whose gradients are
// all-reduced together, the one partition that the CPU engine (data_parallel.h) and the CUDA one
// (trainer/cuda/parallel/cuda_data_parallel.h) share, so that both reduce the same ranges (their
// int8 error-feedback residuals and their quantisation blocks then agree).
//
// Backward produces the units' gradients from the last unit to the first. Walking the units in
// that order, a bucket takes units until its bytes reach the cap, then closes; the last one may
// be smaller. Units are never split. A bucket's units are consecutive in the flat layout, so its
// gradients are one contiguous range [begin, begin + numel), reduced by a single all-reduce that
// is launched when backward finishes the bucket's lowest-index unit (its last in backward order).
//
// A cap of 0 gives one bucket per unit (each unit reduced as soon as backward is done with it).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/parallel/unit_shards.h"

namespace ringmaster::trainer {

struct GradBucket {
  int first_unit = 0, last_unit = 0;  // units [first_unit, last_unit]; first_unit launches it
  size_t begin = 0, numel = 0;        // the flat range of their gradients
};

struct GradBuckets {
  std::vector<GradBucket> buckets;  // in backward order: the one holding the last unit first
  // Per unit: the bucket whose all-reduce starts when backward is done with the unit, or -1
  // (a bucket still waiting for lower units).
  std::vector<int> launch;

  // The buckets of `units` (UnitShards::units: begin and numel are read) under `cap_bytes` of
  // fp32 gradients per bucket. Fails if the units do not tile a contiguous flat range in order.
  static absl::StatusOr<GradBuckets> Make(const std::vector<UnitShard>& units, size_t cap_bytes);

  // The bucket to reduce now that backward is done with `unit`, or null.
  const GradBucket* LaunchedBy(int unit) const {
    const int b = launch[static_cast<size_t>(unit)];
    return b < 0 ? nullptr : &buckets[static_cast<size_t>(b)];
  }
};

// distributed.bucket_cap_mb (MiB, as DDP's) in bytes.
size_t BucketCapBytes(double bucket_cap_mb);

}  // namespace ringmaster::trainer
