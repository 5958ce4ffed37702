#include "trainer/parallel/sharding_plan.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

ShardingTraits ShardingTraits::For(Sharding sharding) {
  ShardingTraits t;
  switch (sharding) {
    case Sharding::kNoShard:
      break;
    case Sharding::kShardGradOp:
      t.shard_grads = true;
      break;
    case Sharding::kFullShard:
      t.shard_params = t.shard_grads = t.reduce_every_micro_batch = true;
      break;
    case Sharding::kHybridShard:
      t.shard_params = t.shard_grads = t.reduce_every_micro_batch = true;
      t.replicate_across_nodes = true;
      break;
  }
  return t;
}

bool ZeroBlockSkip::Skip(int key, int group_size) const {
  const Probe& p = probes_[static_cast<size_t>(key)];
  return group_size > 1 && enabled_ && (p.sparse || p.dense_calls >= kReprobeCalls);
}

void ZeroBlockSkip::Record(int key, bool skipped, const TwoStageStats& stats) {
  Probe& p = probes_[static_cast<size_t>(key)];
  if (!skipped) {
    ++p.dense_calls;
    return;
  }
  p.sparse = stats.active_chunks * 4 < stats.chunks * 3;  // under 75% in use
  p.dense_calls = 0;
}

absl::StatusOr<ShardingPlan> ShardingPlan::Make(const ParamLayout& layout, Sharding sharding,
                                                const DataParallelComms& comms, bool powersgd,
                                                size_t bucket_cap_bytes) {
  ShardingPlan p;
  p.sharding_ = sharding;
  p.traits_ = ShardingTraits::For(sharding);
  p.comms_ = comms;
  p.total_ = layout.total;
  if (comms.world != nullptr) {
    p.world_rank_ = comms.world->rank();
    p.world_size_ = comms.world->size();
  }
  const std::string name(ShardingName(sharding));
  if (p.traits_.replicate_across_nodes && (comms.intra == nullptr || comms.inter == nullptr)) {
    return absl::InvalidArgumentError(
        "hybrid_shard needs intra-node and inter-node communicators (torchrun's "
        "LOCAL_WORLD_SIZE must be the same on every node)");
  }
  if (powersgd && !p.traits_.powersgd_allowed()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compression: powersgd works on replicated gradients: use sharding no_shard or "
        "hybrid_shard (got ",
        name, "); int8/fp16/bf16 work with every sharding"));
  }
  if (bucket_cap_bytes > 0 && p.traits_.shard_grads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "distributed.bucket_cap_mb applies to sharding no_shard only (got ", name, ")"));
  }
  p.group_ = p.traits_.replicate_across_nodes ? comms.intra : comms.world;
  p.parts_ = p.group_ != nullptr ? UnitShards::Make(layout, p.group_->rank(), p.group_->size())
                                 : UnitShards::Make(layout, 0, 1);
  if (!p.traits_.shard_grads) {
    RM_ASSIGN_OR_RETURN(p.buckets_, GradBuckets::Make(p.parts_.units, bucket_cap_bytes));
  }
  return p;
}

Communicator* ShardingPlan::replica_comm() const {
  if (!traits_.shard_grads) return comms_.world;
  return traits_.replicate_across_nodes ? comms_.inter : nullptr;
}

bool ShardingPlan::CountsInNorm() const {
  if (!traits_.shard_grads) return world_rank_ == 0;
  return !traits_.replicate_across_nodes || comms_.inter->rank() == 0;
}

ShardRanges ShardingPlan::SaveRanges() const {
  // Every rank holds everything: each writes an equal slice, so writes run in parallel.
  if (!traits_.shard_grads) return EqualSlice(total_, world_rank_, world_size_);
  // Under hybrid_shard node 0 writes; the other nodes hold the same shards.
  if (traits_.replicate_across_nodes && comms_.inter->rank() != 0) return {};
  return parts_.Owned();
}

ShardRanges ShardingPlan::LoadRanges() const {
  if (!traits_.shard_grads) return EqualSlice(total_, 0, 1);
  return parts_.Owned();
}

std::vector<std::pair<size_t, size_t>> ShardingPlan::LocalSpans(const ShardRanges& ranges) const {
  std::vector<std::pair<size_t, size_t>> spans;
  if (!traits_.shard_grads) {
    for (const auto& [b, e] : ranges.ranges) spans.emplace_back(b, e - b);
  } else if (!ranges.ranges.empty()) {  // the ranges are the units' owned parts, in order
    for (const UnitShard& u : parts_.units) {
      if (u.valid > 0) spans.emplace_back(u.local, u.valid);
    }
  }
  return spans;
}

std::vector<AdamWRange> ShardingPlan::DecayRanges(const ParamLayout& layout) const {
  std::vector<AdamWRange> ranges;
  if (!traits_.shard_grads) {
    for (const ParamSpec& s : layout.specs) {
      ranges.push_back({s.offset, s.offset + s.numel, s.weight_decay});
    }
    return ranges;
  }
  for (const UnitShard& u : parts_.units) {
    const size_t ob = u.owned_begin, oe = ob + u.valid;
    for (const ParamSpec& s : layout.specs) {
      const size_t b = std::max(ob, s.offset), e = std::min(oe, s.offset + s.numel);
      if (b < e) ranges.push_back({u.local + (b - ob), u.local + (e - ob), s.weight_decay});
    }
  }
  return ranges;
}

void ShardingPlan::CopyShards(const float* full, float* local) const {
  for (const UnitShard& u : parts_.units) {
    std::copy_n(full + u.owned_begin, u.valid, local + u.local);
  }
}

std::vector<MatrixRange> ShardingPlan::PowerSgdMatrices(const ParamLayout& layout) const {
  std::vector<MatrixRange> mats;
  for (const ParamSpec& s : layout.specs) {
    if (s.shape.size() != 2) continue;
    const size_t rows = static_cast<size_t>(s.shape[0]), cols = static_cast<size_t>(s.shape[1]);
    if (!traits_.shard_grads) {
      mats.push_back({s.offset, rows, cols});
      continue;
    }
    // The whole rows of this matrix that lie in this rank's shard of its unit.
    const UnitShard& u = parts_.units[s.unit];
    const size_t ob = u.owned_begin, oe = ob + u.valid;
    const size_t b = std::max(ob, s.offset), e = std::min(oe, s.offset + s.numel);
    if (b >= e) continue;
    const size_t r0 = (b - s.offset + cols - 1) / cols, r1 = (e - s.offset) / cols;
    if (r1 > r0) mats.push_back({u.local + (s.offset + r0 * cols - ob), r1 - r0, cols});
  }
  return mats;
}

}  // namespace ringmaster::trainer
