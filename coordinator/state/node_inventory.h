// What the coordinator knows about a node's hardware: the agent's inventory (protos/ringmaster/
// v1/types.proto, NodeInventory), as plain structs so that the planner and the job database do
// not depend on generated code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster::coordinator {

struct GpuInfo {
  int index = 0;  // CUDA device ordinal on the node
  std::string name;
  uint64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability, e.g. 6.1 (P40), 8.0 (A100)
  bool tensor_cores = false;       // cc >= 7.0

  // 61 for 6.1: one comparable number.
  int ComputeCapability() const { return cc_major * 10 + cc_minor; }
};

struct NodeInventory {
  std::string node_name;               // unique per cluster
  std::string hostname;                // ranks on one host are grouped
  std::vector<std::string> addresses;  // most preferred first
  std::string rack;                    // topology label; empty: unknown
  int cpu_cores = 0;
  std::vector<GpuInfo> gpus;  // empty: a CPU node
  // Samples/s of one trainer process on one of the node's devices (a GPU, or the whole CPU);
  // 0: not measured.
  double trainer_samples_per_second = 0;
  // Host memory in bytes (RAM, or the agent's cgroup limit when lower) and what was available
  // when the node registered; 0: not reported. CPU ranks must fit in the total.
  uint64_t host_memory_total_bytes = 0;
  uint64_t host_memory_available_bytes = 0;
};

}  // namespace ringmaster::coordinator
