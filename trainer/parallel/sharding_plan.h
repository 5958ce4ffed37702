// FSDP-style data parallelism, what the two engines (data_parallel.h on the CPU,
// trainer/cuda/parallel/cuda_data_parallel.h on the GPU) decide alike, written once here.
//
// Strategies (distributed.sharding), resolved once into ShardingTraits (as FSDP's
// HandleShardingStrategy; the one place the enum is tested):
//   no_shard       DDP: full parameters, gradients and AdamW state on every rank; in the step's
//                  last micro-batch each bucket of consecutive units (grad_buckets.h; one unit
//                  without bucket_cap_bytes) is all-reduced when backward is done with it,
//                  overlapping the rest of backward.
//   shard_grad_op  ZeRO-2: full parameters; in the last micro-batch each unit's gradients are
//                  reduce-scattered to their owners; AdamW updates the local shards, which are
//                  then all-gathered into the full parameters.
//   full_shard     ZeRO-3: only the local shard of each unit is kept; a unit is all-gathered just
//                  before use (the next one prefetched) and freed after (the head is kept from
//                  forward into backward); its gradients are reduce-scattered after every
//                  micro-batch.
//   hybrid_shard   full_shard inside a node (intra), replicas across nodes: the shard gradients
//                  are all-reduced across nodes (inter) after backward.
// Units are the layout's units (unit_shards.h): padded to a multiple of the shard group and cut
// into equal shards, so both engines' checkpoints name the same ranges.
//
// Compression (distributed.compression) acts on the gradient reductions, alike on both engines
// (the same wire formats, wire_codec.h): with fp16 / bf16 / int8 a reduce-scatter is an
// all-to-all of encoded blocks each owner decodes and adds in rank order, an all-reduce the
// two-stage compressed all-reduce (two_stage_allreduce.h); int8 keeps each sender's quantisation
// error (per unit for reduce-scatters, per all-reduce key). powersgd (powersgd.h) compresses the
// replicated gradients (no_shard's, hybrid_shard's across nodes) once the optimizer has taken
// powersgd_start_step steps. All-reduces skip zero blocks (distributed.skip_zero_blocks) by
// ZeroBlockSkip's rule.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
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
  const UnitShards& parts() const { return parts_; }
  const std::vector<UnitShard>& units() const { return parts_.units; }
  int num_units() const { return static_cast<int>(parts_.units.size()); }
  const GradBuckets& buckets() const { return buckets_; }
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
  // Those ranges as (offset, count) spans of this rank's updated buffers (the full parameters
  // and moments, or the local shards), in range order.
  std::vector<std::pair<size_t, size_t>> LocalSpans(const ShardRanges& ranges) const;
  // The ranges [first, last) of the updated part (update_size() floats) and whether AdamW
  // decays them.
  std::vector<AdamWRange> DecayRanges(const ParamLayout& layout) const;
  // This rank's shards of `full` (the layout's floats) into `local` (update_size() floats,
  // padding left as it is).
  void CopyShards(const float* full, float* local) const;
  // PowerSGD's matrices in the replicated gradients (of update_size() floats): every 2-D
  // parameter, or under hybrid_shard the whole rows of each in this rank's shards.
  std::vector<MatrixRange> PowerSgdMatrices(const ParamLayout& layout) const;

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
