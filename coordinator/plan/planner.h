// The rank plan: which node runs which ranks of a generation, with what precision, wire
// compression, micro-batch weight and environment.
//
// Topology first: nodes are ordered by rack label, then hostname, then node name (node id last,
// so the order is total and the same plan comes out whatever order the nodes joined in); each
// node gets a contiguous block of global ranks (local ranks 0..k-1), and GROUP_RANK is the
// node's index. Ranks on one host and one rack are neighbours in the ring, so most ring hops
// stay on the fastest links.
//
// Per rank, with the job's `auto` settings:
//  - precision from the GPU's compute capability: >= 8.0 bf16, 7.x fp16 (loss scaling),
//    < 7.0 fp32; CPU ranks always fp32 (the CPU trainer computes in fp32 whatever is asked).
//  - compression: int8 for GPUs without tensor cores (< 7.0: compute is the bottleneck there
//    and the wire is cheap to shrink), none for newer GPUs, and `auto` on CPU ranks, whose
//    trainer measures its links itself. Today's codecs are symmetric, so the job's wire codec
//    (JobPlan::wire_compression, RINGMASTER_COMPRESSION) is int8 when any rank asks for it.
//  - micro-batch weight proportional to the rank's measured throughput (the node's
//    trainer_samples_per_second per GPU, or shared by the processes of a CPU node), normalised
//    to sum to the world size; all 1 unless every node has a measurement, and all 1 (with a
//    warning) when the weights would not fit in one environment variable (jobspec/plan_vars.h).
//
// Work is O(R + N log N) for R ranks on N nodes: 4096 nodes x 8 GPUs plan in well under a second
// (0.06-0.4 s on a shared 2-core machine; mostly the per-rank environment strings).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/state/node_inventory.h"
#include "jobspec/job_settings.h"

namespace ringmaster::coordinator {

// What the planner needs from the job (its `distributed:` and `train:` sections) and the
// coordinator.
struct PlanRequest {
  std::string job_id;
  int64_t generation = 0;
  std::string coordinator_address;      // RINGMASTER_COORDINATOR, the coordinator's host:port
  int master_port = 29500;              // MASTER_PORT; rank 0 hosts the rendezvous store there
  std::string procs_per_node = "auto";  // "auto" (one per GPU, 1 on a CPU node) or N
  jobspec::Device device = jobspec::Device::kAuto;                 // train.device
  jobspec::Precision precision = jobspec::Precision::kAuto;        // train.precision
  jobspec::Compression compression = jobspec::Compression::kAuto;  // distributed.compression
  jobspec::Sharding sharding = jobspec::Sharding::kNoShard;  // hybrid_shard: equal ranks per node
  jobspec::Backend backend = jobspec::Backend::kAuto;        // distributed.backend
  // Parameters of the job's model (jobspec/model_memory.h), 0 when unknown (a pretrained model
  // whose config the coordinator does not read): a GPU rank must hold its model state, and a
  // CPU node's memory the model state of all its ranks.
  uint64_t model_parameters = 0;
};

struct PlanNode {
  std::string node_id;
  NodeInventory inventory;
};

struct RankPlan {
  int global_rank = 0;
  int local_rank = 0;
  int group_rank = 0;                                        // index of the node in JobPlan::nodes
  int gpu_index = -1;                                        // GpuInfo::index; -1 on a CPU rank
  jobspec::Precision precision = jobspec::Precision::kFp32;  // never kAuto
  // What this rank asks for (see the header comment).
  jobspec::Compression compression = jobspec::Compression::kAuto;
  double weight = 1.0;  // share of a global batch relative to an average rank
  // Variables that differ between ranks: RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
  // ROLE_RANK, RINGMASTER_PRECISION. EnvForRank adds JobPlan::common_env.
  std::map<std::string, std::string> env;
};

struct NodePlan {
  std::string node_id;
  std::string hostname;
  std::string rack;
  std::string address;  // first inventory address, else the hostname
  int group_rank = 0;
  int first_rank = 0;  // global ranks first_rank .. first_rank + num_ranks - 1
  int num_ranks = 0;
  bool gpu = false;  // ranks run on GPUs
};

struct JobPlan {
  int world_size = 0;
  std::string master_addr;  // rank 0's node address
  // nccl when every rank is a GPU rank, else gloo (for auto); never kAuto.
  jobspec::Backend backend = jobspec::Backend::kGloo;
  // The codec every rank uses on the wire (RINGMASTER_COMPRESSION).
  jobspec::Compression wire_compression = jobspec::Compression::kAuto;
  std::vector<NodePlan> nodes;  // by group rank
  std::vector<RankPlan> ranks;  // by global rank
  // Variables every rank shares: WORLD_SIZE, GROUP_WORLD_SIZE, ROLE_NAME, ROLE_WORLD_SIZE,
  // MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT (= generation), TORCHELASTIC_RUN_ID,
  // RINGMASTER_JOB_ID, RINGMASTER_GENERATION, RINGMASTER_COORDINATOR, RINGMASTER_COMPRESSION,
  // and RINGMASTER_RANK_WEIGHTS (jobspec/plan_vars.h) unless the shares are equal.
  std::map<std::string, std::string> common_env;
  // Settings the planner had to give up on, for the coordinator's log and the job's status.
  std::vector<std::string> warnings;
};

// Plans `nodes` (the rendezvous participants) for `request`. InvalidArgument for malformed
// input (a bad procs_per_node or port, duplicate or empty node ids, a node without address or
// hostname); FailedPrecondition, naming the node, when the nodes cannot run the job as written
// (fewer GPUs than procs_per_node or, on a CPU node, cores; a GPU smaller than the model's fp32
// training state per rank, or a CPU node whose reported memory is smaller than that state times
// its ranks; device cuda on a CPU node, bf16 on a GPU below sm_80, nccl with
// CPU ranks, hybrid_shard with unequal ranks per node).
absl::StatusOr<JobPlan> PlanRanks(const PlanRequest& request, const std::vector<PlanNode>& nodes);

// The full environment of one rank: common_env overlaid with the rank's own variables.
std::map<std::string, std::string> EnvForRank(const JobPlan& plan, int global_rank);

// bf16 for compute capability >= 8.0, fp16 for 7.x, fp32 below.
jobspec::Precision AutoPrecisionFor(const GpuInfo& gpu);

}  // namespace ringmaster::coordinator
