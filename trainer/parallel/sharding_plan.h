// What the two data-parallel engines (data_parallel.h on the CPU,
// trainer/cuda/parallel/cuda_data_parallel.h on the GPU) decide alike, written once:
//   ShardingTraits  the job's distributed.sharding resolved into the few facts the engines act
//                   on (as FSDP's HandleShardingStrategy); the one place the enum is tested.
//   ShardingPlan    the checks of a strategy against its settings and communicators, the shard
//                   group, the unit partition (unit_shards.h), no_shard's buckets
//                   (grad_buckets.h), which rank counts an element in the gradient norm, the
//                   checkpoint ranges, the AdamW weight-decay ranges of the updated part, and
//                   PowerSGD's matrices.
//   ZeroBlockSkip   when an all-reduce of replicated gradients skips zero blocks
//                   (distributed.skip_zero_blocks): the probe state per all-reduce key.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"
#include "trainer/comm/communicator.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/grad_buckets.h"
#include "trainer/parallel/powersgd.h"
#include "trainer/parallel/two_stage_allreduce.h"
#include "trainer/parallel/unit_shards.h"
#include "trainer/parallel/wire_codec.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {

// The job's distributed.sharding (jobspec/job_settings.h, which owns the names).
using jobspec::Sharding;
inline std::string_view ShardingName(Sharding s) { return jobspec::SettingName(s); }

// The communicators an engine runs on. `world` spans every rank. For hybrid_shard, `intra` is
// this node's ranks (the shard group) and `inter` the ranks with this rank's local index on
// every node; both null otherwise.
struct DataParallelComms {
  Communicator* world = nullptr;
  Communicator* intra = nullptr;
  Communicator* inter = nullptr;
};

struct ShardingTraits {
  // Only this rank's shard of each unit's parameters is kept; a unit is all-gathered before use
  // (the next one prefetched) and freed after (full_shard, hybrid_shard).
  bool shard_params = false;
  // Gradients are reduce-scattered to their owners and AdamW updates the local shards only
  // (every strategy but no_shard); otherwise they are all-reduced (replicated).
  bool shard_grads = false;
  // Gradients are reduced after every micro-batch (into the shards); otherwise in the step's
  // last micro-batch only, accumulating locally before.
  bool reduce_every_micro_batch = false;
  // The shard group is a node; every node holds the same shards and their gradients are
  // all-reduced across nodes (hybrid_shard).
  bool replicate_across_nodes = false;

  // The updated shards are all-gathered into full parameters after AdamW (shard_grad_op).
  bool publish_shards() const { return shard_grads && !shard_params; }
  // Gradients of the whole layout live on every rank during the step (no_shard,
  // shard_grad_op): the model writes them in place.
  bool full_grads() const { return !shard_params; }
  // PowerSGD compresses replicated gradients: the world's (no_shard) or across nodes.
  bool powersgd_allowed() const { return !shard_grads || replicate_across_nodes; }

  static ShardingTraits For(Sharding sharding);
};

// Sum-all-reduce keys of replicated gradients (residuals and zero-block probes follow them):
// no_shard's buckets by their launching unit (0..units-1), hybrid_shard's cross-node
// all-reduce, PowerSGD's three all-reduces per call.
struct AllReduceKeys {
  static int Bucket(int launching_unit) { return launching_unit; }
  static int CrossNode(int num_units) { return num_units; }
  static int PowerSgd(int num_units, int call) { return num_units + 1 + call; }
  static int Count(int num_units) { return num_units + 1 + kPowerSgdCalls; }
  static constexpr int kPowerSgdCalls = 3;  // PowerSgd::AllReduce's all-reduces per call
};

// Zero-block skipping (TwoStageAllReduce's skip_zero_chunks) costs a small all-gather of masks;
// a key whose blocks were (nearly) all in use at its last probe skips the probe, and probes again
// after kReprobeCalls calls. The state comes from the masks every rank shares, so all ranks
// decide alike.
class ZeroBlockSkip {
 public:
  ZeroBlockSkip(bool enabled, int keys) : enabled_(enabled), probes_(static_cast<size_t>(keys)) {}
  // Whether this call of `key` over a group of `group_size` skips zero blocks.
  bool Skip(int key, int group_size) const;
  // Whether the call can use the backend's own all-reduce (dense, uncompressed).
  static bool Plain(WireCodec codec, bool skip, int group_size) {
    return group_size == 1 || (codec == WireCodec::kNone && !skip);
  }
  // After the call: what TwoStageAllReduce found (when `skipped`).
  void Record(int key, bool skipped, const TwoStageStats& stats);

 private:
  struct Probe {
    bool sparse = true;  // probe on the first call
    int dense_calls = 0;
  };
  static constexpr int kReprobeCalls = 64;
  bool enabled_;
  std::vector<Probe> probes_;
};

class ShardingPlan {
 public:
  // `comms.world` null: a world of one. Checks the strategy against the settings (PowerSGD,
  // buckets) and the communicators (hybrid_shard's intra and inter).
  static absl::StatusOr<ShardingPlan> Make(const ParamLayout& layout, Sharding sharding,
                                           const DataParallelComms& comms, bool powersgd,
                                           size_t bucket_cap_bytes);

  Sharding sharding() const { return sharding_; }
  const ShardingTraits& traits() const { return traits_; }
  const DataParallelComms& comms() const { return comms_; }
  Communicator* group() const { return group_; }  // the shard group: world, or intra (hybrid)
  int world_size() const { return world_size_; }
  const UnitShards& parts() const { return parts_; }
  const std::vector<UnitShard>& units() const { return parts_.units; }
  int num_units() const { return static_cast<int>(parts_.units.size()); }
  const GradBuckets& buckets() const { return buckets_; }
  size_t total() const { return total_; }
  // Floats AdamW updates on this rank: the layout, or the local shards.
  size_t update_size() const { return traits_.shard_grads ? parts_.local_total : total_; }
  // Where gradients that replicate across ranks are all-reduced: the world (no_shard), across
  // nodes (hybrid_shard), or nowhere (null).
  Communicator* replica_comm() const;

  // Whether the gradients are reduced in this micro-batch.
  bool ReducesIn(bool last_micro_batch) const {
    return traits_.reduce_every_micro_batch || last_micro_batch;
  }
  // Whether this rank's reduced gradients count in the global norm: each element once (rank 0
  // for replicated gradients, the shard owners otherwise, node 0's under hybrid_shard).
  bool CountsInNorm() const;
  // Checkpoints: the ranges this rank writes (together they tile the layout) and those it holds.
  ShardRanges SaveRanges() const;
  ShardRanges LoadRanges() const;
  // The ranges [first, last) of the updated part (update_size() floats) and whether AdamW
  // decays them.
  std::vector<AdamWRange> DecayRanges(const ParamLayout& layout) const;
  // PowerSGD's matrices (PowerSgdMatricesFor) for the replicated gradients of this strategy.
  std::vector<MatrixRange> PowerSgdMatrices(const ParamLayout& layout) const;
  // The replicated gradients PowerSGD compresses, in floats (full or the local shards).
  size_t PowerSgdFloats() const { return update_size(); }

 private:
  Sharding sharding_ = Sharding::kNoShard;
  ShardingTraits traits_;
  DataParallelComms comms_;
  Communicator* group_ = nullptr;
  int world_rank_ = 0, world_size_ = 1;
  size_t total_ = 0;
  UnitShards parts_;
  GradBuckets buckets_;
};

}  // namespace ringmaster::trainer
