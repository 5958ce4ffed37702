// PlanRanks: node order, rank blocks, precision, compression, weights, environment.
#include "coordinator/plan/planner.h"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/absl_view.h"
#include "jobspec/model_memory.h"
#include "jobspec/plan_vars.h"
#include "jobspec/precision_policy.h"

namespace ringmaster::coordinator {

using jobspec::Backend;
using jobspec::Compression;
using jobspec::Device;
using jobspec::Precision;
using jobspec::SettingName;
using jobspec::Sharding;

namespace {

// Ranks per CPU node when the node does not report its core count.
constexpr int kMaxCpuRanksPerNode = 256;

// 0 for "auto", else the positive count (jobspec's one reading of the setting).
absl::StatusOr<int> ParseProcsPerNode(const std::string& v) {
  absl::StatusOr<int> n = jobspec::ParseProcsPerNode(v);
  if (!n.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("plan: procs_per_node: ", n.status().message()));
  }
  return n;
}

std::string GpuName(const PlanNode& node, const GpuInfo& gpu) {
  return absl::StrCat("node ", node.node_id, " GPU ", gpu.index, " (", gpu.name, ", sm_",
                      gpu.cc_major, gpu.cc_minor, ")");
}

absl::Status ValidateRequest(const PlanRequest& r) {
  if (r.job_id.empty()) return absl::InvalidArgumentError("plan: empty job id");
  if (r.generation < 0) {
    return absl::InvalidArgumentError(absl::StrCat("plan: generation ", r.generation, " < 0"));
  }
  if (r.master_port < 1 || r.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan: master port ", r.master_port, " is not in 1..65535"));
  }
  return absl::OkStatus();
}

}  // namespace

Precision AutoPrecisionFor(const GpuInfo& gpu) {
  return jobspec::AutoPrecisionFor(gpu.ComputeCapability());
}

absl::StatusOr<JobPlan> PlanRanks(const PlanRequest& request, const std::vector<PlanNode>& nodes) {
  if (absl::Status st = ValidateRequest(request); !st.ok()) return st;
  absl::StatusOr<int> procs = ParseProcsPerNode(request.procs_per_node);
  if (!procs.ok()) return procs.status();
  if (nodes.empty()) return absl::InvalidArgumentError("plan: no nodes");

  absl::flat_hash_set<std::string> ids;
  ids.reserve(nodes.size());
  for (const PlanNode& n : nodes) {
    if (n.node_id.empty()) return absl::InvalidArgumentError("plan: a node has an empty id");
    if (!ids.insert(n.node_id).second) {
      return absl::InvalidArgumentError(absl::StrCat("plan: node ", n.node_id, " appears twice"));
    }
    if (n.inventory.addresses.empty() && n.inventory.hostname.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan: node ", n.node_id, " has neither an address nor a hostname"));
    }
  }

  // Topology order: rack, hostname, node name, node id (unique, so the order is total).
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const PlanNode& x = nodes[a];
    const PlanNode& y = nodes[b];
    return std::tie(x.inventory.rack, x.inventory.hostname, x.inventory.node_name, x.node_id) <
           std::tie(y.inventory.rack, y.inventory.hostname, y.inventory.node_name, y.node_id);
  });

  JobPlan plan;
  plan.nodes.reserve(nodes.size());
  const bool cpu_only = request.device == Device::kCpu;
  bool any_cpu = false, any_int8 = false, any_auto = false;
  int first_lws = -1;
  bool uniform_lws = true;
  std::vector<double> per_rank_speed;  // samples/s of each rank, when every node is measured
  bool all_measured = true;

  // Pass 1: nodes and their rank blocks.
  int next_rank = 0;
  for (size_t gi = 0; gi < order.size(); ++gi) {
    const PlanNode& node = nodes[order[gi]];
    const NodeInventory& inv = node.inventory;
    NodePlan np;
    np.node_id = node.node_id;
    np.hostname = inv.hostname;
    np.rack = inv.rack;
    np.address = inv.addresses.empty() ? inv.hostname : inv.addresses.front();
    np.group_rank = static_cast<int>(gi);
    np.first_rank = next_rank;
    np.gpu = !cpu_only && !inv.gpus.empty();
    if (request.device == Device::kCuda && inv.gpus.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("plan: train.device is cuda but node ",
                                                        node.node_id, " (", inv.hostname,
                                                        ") has no GPU"));
    }
    if (np.gpu) {
      np.num_ranks = *procs == 0 ? static_cast<int>(inv.gpus.size()) : *procs;
      if (np.num_ranks > static_cast<int>(inv.gpus.size())) {
        return absl::FailedPreconditionError(absl::StrCat("plan: procs_per_node ", *procs,
                                                          " but node ", node.node_id, " has ",
                                                          inv.gpus.size(), " GPU(s)"));
      }
    } else {
      np.num_ranks = *procs == 0 ? 1 : *procs;
      // One rank per core at most: more only time-share the cores, and an unbounded count
      // (procs_per_node: 100000) would plan that many ranks into one StartRanks message.
      // A node that reports no core count is held to kMaxCpuRanksPerNode.
      const int cores = inv.cpu_cores > 0 ? inv.cpu_cores : kMaxCpuRanksPerNode;
      if (np.num_ranks > cores) {
        return absl::FailedPreconditionError(
            absl::StrCat("plan: procs_per_node ", *procs, " but CPU node ", node.node_id, " has ",
                         cores, " core(s); a CPU node runs at most one rank per core"));
      }
      any_cpu = true;
    }
    if (first_lws < 0) first_lws = np.num_ranks;
    uniform_lws = uniform_lws && np.num_ranks == first_lws;
    if (!(inv.trainer_samples_per_second > 0)) all_measured = false;
    next_rank += np.num_ranks;
    plan.nodes.push_back(std::move(np));
  }
  plan.world_size = next_rank;

  // A CPU node's ranks share its host memory: together their model state (a lower bound, as on
  // a GPU) must fit in what the node reported, else no rank can finish allocating its model.
  // The total, not the available memory: that changes by the second, and a job must not fail
  // on a figure that would have let it run a minute later. Unreported (0): not checked.
  for (const NodePlan& np : plan.nodes) {
    const NodeInventory& inv = nodes[order[static_cast<size_t>(np.group_rank)]].inventory;
    if (np.gpu || inv.host_memory_total_bytes == 0) continue;
    const uint64_t per_rank = trainer::ModelStateBytesPerRank(
        request.model_parameters, request.sharding, plan.world_size, np.num_ranks);
    const uint64_t need = per_rank * static_cast<uint64_t>(np.num_ranks);
    if (need > inv.host_memory_total_bytes) {
      constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
      auto gib = [](uint64_t b) { return absl::StrFormat("%.1f", static_cast<double>(b) / kGiB); };
      return absl::FailedPreconditionError(absl::StrCat(
          "plan: the model's fp32 training state (", request.model_parameters,
          " parameters x 16 bytes, sharding ", std::string(SettingName(request.sharding)), " over ",
          plan.world_size, " rank(s)) needs ", gib(per_rank), " GiB per rank, ", gib(need),
          " GiB for the ", np.num_ranks, " rank(s) on CPU node ", np.node_id, " (", inv.hostname,
          "), but it has ", gib(inv.host_memory_total_bytes), " GiB of memory"));
    }
  }

  if (request.sharding == Sharding::kHybridShard && !uniform_lws) {
    return absl::FailedPreconditionError(
        "plan: hybrid_shard needs the same number of ranks on every node, but the joined nodes "
        "run different numbers (set procs_per_node, or use full_shard)");
  }
  if (request.backend == Backend::kNccl && any_cpu) {
    return absl::FailedPreconditionError(
        "plan: backend nccl, but some joined nodes run CPU ranks (use gloo or auto)");
  }
  plan.backend = request.backend != Backend::kAuto ? request.backend
                                                   : (any_cpu ? Backend::kGloo : Backend::kNccl);

  // Pass 2: ranks.
  plan.ranks.resize(static_cast<size_t>(plan.world_size));
  if (all_measured) per_rank_speed.resize(static_cast<size_t>(plan.world_size));
  for (const NodePlan& np : plan.nodes) {
    const PlanNode& node = nodes[order[static_cast<size_t>(np.group_rank)]];
    const NodeInventory& inv = node.inventory;
    const std::string lws = std::to_string(np.num_ranks);
    const std::string group = std::to_string(np.group_rank);
    for (int lr = 0; lr < np.num_ranks; ++lr) {
      const int r = np.first_rank + lr;
      RankPlan& rp = plan.ranks[static_cast<size_t>(r)];
      rp.global_rank = r;
      rp.local_rank = lr;
      rp.group_rank = np.group_rank;
      if (np.gpu) {
        const GpuInfo& gpu = inv.gpus[static_cast<size_t>(lr)];
        rp.gpu_index = gpu.index;
        // A lower bound (activations come on top): a GPU below it cannot run the rank at all.
        if (const uint64_t need = trainer::ModelStateBytesPerRank(
                request.model_parameters, request.sharding, plan.world_size, np.num_ranks);
            gpu.memory_bytes > 0 && need > gpu.memory_bytes) {
          constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
          return absl::FailedPreconditionError(absl::StrCat(
              "plan: the model's fp32 training state (", request.model_parameters,
              " parameters x 16 bytes, sharding ", std::string(SettingName(request.sharding)),
              " over ", plan.world_size, " rank(s)) needs ",
              absl::StrFormat("%.1f", static_cast<double>(need) / kGiB), " GiB per rank, but ",
              GpuName(node, gpu), " has ",
              absl::StrFormat("%.1f", static_cast<double>(gpu.memory_bytes) / kGiB), " GiB"));
        }
        if (request.precision == Precision::kAuto) {
          rp.precision = AutoPrecisionFor(gpu);
        } else if (const int need = jobspec::MinComputeCapabilityFor(request.precision);
                   gpu.ComputeCapability() < need) {
          return absl::FailedPreconditionError(absl::StrCat(
              "plan: train.precision ", std::string(SettingName(request.precision)), " needs sm_",
              need, " or newer, but ", GpuName(node, gpu), " is older (use precision: auto, ",
              need > 70 ? "fp16 or fp32)" : "or fp32)"));
        } else {
          rp.precision = request.precision;
        }
        if (request.compression == Compression::kAuto) {
          rp.compression = gpu.ComputeCapability() < 70 ? Compression::kInt8 : Compression::kNone;
        } else {
          rp.compression = request.compression;
        }
      } else {
        rp.precision = Precision::kFp32;
        rp.compression = request.compression;
      }
      any_int8 = any_int8 || rp.compression == Compression::kInt8;
      any_auto = any_auto || rp.compression == Compression::kAuto;
      if (all_measured) {
        per_rank_speed[static_cast<size_t>(r)] =
            np.gpu ? inv.trainer_samples_per_second : inv.trainer_samples_per_second / np.num_ranks;
      }
      rp.env = {
          {"RANK", std::to_string(r)},
          {"LOCAL_RANK", std::to_string(lr)},
          {"LOCAL_WORLD_SIZE", lws},
          {"GROUP_RANK", group},
          {"ROLE_RANK", std::to_string(r)},
          {jobspec::kPrecisionVar, std::string(SettingName(rp.precision))},
          // The rank's device, so that a job's `train.device: auto` runs where it was
          // placed: the GPU given to it (CUDA_VISIBLE_DEVICES) or the CPU.
          {jobspec::kDeviceVar, std::string(SettingName(np.gpu ? Device::kCuda : Device::kCpu))}};
    }
  }

  if (request.compression != Compression::kAuto) {
    plan.wire_compression = request.compression;
  } else {
    plan.wire_compression = any_int8   ? Compression::kInt8
                            : any_auto ? Compression::kAuto
                                       : Compression::kNone;
  }

  std::vector<double> weights(static_cast<size_t>(plan.world_size), 1.0);
  if (all_measured) {
    double total = 0;
    for (double s : per_rank_speed) total += s;
    for (size_t r = 0; r < weights.size(); ++r) {
      weights[r] = per_rank_speed[r] * plan.world_size / total;
    }
  }
  std::string weights_env = jobspec::FormatRankWeights(weights);
  if (weights_env.size() > jobspec::kMaxRankWeightsBytes) {
    plan.warnings.push_back(absl::StrCat("micro-batch weights for ", plan.world_size,
                                         " ranks need ", weights_env.size(),
                                         " bytes, more than RINGMASTER_RANK_WEIGHTS can carry (",
                                         jobspec::kMaxRankWeightsBytes, "): using equal shares"));
    weights.assign(weights.size(), 1.0);
    weights_env.clear();
  }
  for (size_t r = 0; r < weights.size(); ++r) plan.ranks[r].weight = weights[r];

  plan.master_addr = plan.nodes.front().address;
  const std::string world = std::to_string(plan.world_size);
  const std::string gen = std::to_string(request.generation);
  plan.common_env = {
      {"WORLD_SIZE", world},
      {"GROUP_WORLD_SIZE", std::to_string(plan.nodes.size())},
      {"ROLE_NAME", "trainer"},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", plan.master_addr},
      {"MASTER_PORT", std::to_string(request.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", gen},
      {"TORCHELASTIC_RUN_ID", request.job_id},
      {"RINGMASTER_JOB_ID", request.job_id},
      {"RINGMASTER_GENERATION", gen},
      {"RINGMASTER_COORDINATOR", request.coordinator_address},
      {jobspec::kCompressionVar, std::string(SettingName(plan.wire_compression))},
  };
  if (!weights_env.empty()) plan.common_env[jobspec::kRankWeightsVar] = std::move(weights_env);
  return plan;
}

std::map<std::string, std::string> EnvForRank(const JobPlan& plan, int global_rank) {
  std::map<std::string, std::string> env = plan.common_env;
  if (global_rank < 0 || global_rank >= static_cast<int>(plan.ranks.size())) return env;
  for (const auto& [k, v] : plan.ranks[static_cast<size_t>(global_rank)].env) env[k] = v;
  return env;
}

}  // namespace ringmaster::coordinator
