#include "coordinator/bench/plan_check.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace ringmaster::bench_scale {
namespace {

std::string GetEnv(const google::protobuf::Map<std::string, std::string>& env,
                   const std::string& k) {
  auto it = env.find(k);
  return it == env.end() ? std::string("<unset>") : it->second;
}

}  // namespace

std::string JobYaml(int n, int gpus) {
  return absl::StrCat(
      "name: scale-", n, "x", gpus,
      "\nmodel:\n  init_from: models/bert-base-uncased\ndata:\n  train: data/train.tsv\n"
      "train:\n  device: cuda\n  global_batch_size: ",
      n * gpus, "\n  micro_batch_size: 1\noutput:\n  dir: runs/scale\ndistributed:\n  nodes: ", n,
      "\n  procs_per_node: ", gpus, "\n");
}

// Empty when every check passes; otherwise the first problems found.
std::vector<std::string> Verify(const Run& run, const std::string& job_id, int64_t generation) {
  std::vector<std::string> errors;
  auto fail = [&](std::string e) {
    if (errors.size() < 20) errors.push_back(std::move(e));
  };
  const int g = run.flags.gpus;
  const int world = run.n * g;
  // Topology order the planner promises: rack, hostname, node name, node id.
  std::vector<const SimAgent*> order;
  for (const auto& a : run.agents) order.push_back(a.get());
  std::sort(order.begin(), order.end(), [](const SimAgent* x, const SimAgent* y) {
    return std::tie(x->inventory.rack(), x->inventory.hostname(), x->inventory.node_name(),
                    x->node_id) < std::tie(y->inventory.rack(), y->inventory.hostname(),
                                           y->inventory.node_name(), y->node_id);
  });
  std::vector<int> seen(static_cast<size_t>(world), 0);
  const std::string master_addr = order.front()->inventory.addresses(0);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const SimAgent& a = *order[pos];
    const std::string who = absl::StrCat(a.inventory.node_name(), " (", a.node_id, ")");
    if (!a.start) {
      fail(absl::StrCat(who, ": no StartRanks"));
      continue;
    }
    const v1::StartRanks& s = *a.start;
    if (a.start_messages != 1) fail(absl::StrCat(who, ": ", a.start_messages, " StartRanks"));
    if (s.job_id() != job_id) fail(absl::StrCat(who, ": job ", s.job_id()));
    if (s.generation() != generation) fail(absl::StrCat(who, ": generation ", s.generation()));
    if (static_cast<int>(s.world_size()) != world) {
      fail(absl::StrCat(who, ": world_size ", s.world_size()));
    }
    if (GetEnv(s.common_env(), "WORLD_SIZE") != std::to_string(world)) {
      fail(absl::StrCat(who, ": WORLD_SIZE ", GetEnv(s.common_env(), "WORLD_SIZE")));
    }
    if (GetEnv(s.common_env(), "MASTER_ADDR") != master_addr) {
      fail(absl::StrCat(who, ": MASTER_ADDR ", GetEnv(s.common_env(), "MASTER_ADDR"), ", expected ",
                        master_addr));
    }
    if (s.ranks_size() != g) {
      fail(absl::StrCat(who, ": ", s.ranks_size(), " ranks"));
      continue;
    }
    const int first = static_cast<int>(s.ranks(0).global_rank());
    if (first != static_cast<int>(pos) * g) {
      fail(absl::StrCat(who, ": first rank ", first, ", expected ", pos * g,
                        " (topology order: rack, hostname)"));
    }
    for (int lr = 0; lr < g; ++lr) {
      const v1::RankLaunch& r = s.ranks(lr);
      const int gr = static_cast<int>(r.global_rank());
      if (gr < 0 || gr >= world) {
        fail(absl::StrCat(who, ": global rank ", gr, " out of range"));
        continue;
      }
      ++seen[static_cast<size_t>(gr)];
      if (gr != first + lr) fail(absl::StrCat(who, ": ranks not contiguous at ", gr));
      if (static_cast<int>(r.local_rank()) != lr) {
        fail(absl::StrCat(who, ": local rank ", r.local_rank(), " at ", lr));
      }
      if (r.gpu_index() != lr) fail(absl::StrCat(who, ": gpu_index ", r.gpu_index()));
      if (GetEnv(r.env(), "RANK") != std::to_string(gr) ||
          GetEnv(r.env(), "LOCAL_RANK") != std::to_string(lr) ||
          GetEnv(r.env(), "GROUP_RANK") != std::to_string(pos) ||
          GetEnv(r.env(), "LOCAL_WORLD_SIZE") != std::to_string(g)) {
        fail(absl::StrCat(who, ": env of rank ", gr, " RANK=", GetEnv(r.env(), "RANK"),
                          " LOCAL_RANK=", GetEnv(r.env(), "LOCAL_RANK"),
                          " GROUP_RANK=", GetEnv(r.env(), "GROUP_RANK")));
      }
      if (GetEnv(r.env(), "RINGMASTER_PRECISION") != "bf16") {
        fail(absl::StrCat(who, ": RINGMASTER_PRECISION ", GetEnv(r.env(), "RINGMASTER_PRECISION")));
      }
      if (r.micro_batch_weight() != 1.0) {
        fail(absl::StrCat(who, ": weight ", r.micro_batch_weight()));
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (seen[static_cast<size_t>(r)] != 1) {
      fail(absl::StrCat("global rank ", r, " assigned ", seen[static_cast<size_t>(r)], " times"));
    }
  }
  return errors;
}

}  // namespace ringmaster::bench_scale
