// What a node reports when it registers (protos/ringmaster/v1/types.proto, NodeInventory):
// hostname, addresses, CPU cores, rack label and GPUs.
//
// GPUs come from the CUDA runtime when the agent is built with CUDA (RINGMASTER_AGENT_CUDA);
// without it a node reports none and runs CPU trainers. Tests (and operators describing a node
// by hand) replace the detected GPUs with an override string:
//
//   "2xTesla P40:sm_61:24GiB"                     two P40s
//   "1xNVIDIA A100:sm_80:80GiB,1xTesla T4:sm_75:16GiB"
//   "none"                                        no GPUs (a CPU node), whatever is installed
//
// Each group is [COUNTx]NAME:sm_MAJORMINOR:MEMORY, MEMORY an integer with GiB, MiB or GB. The
// override only changes what is reported; the trainer the agent runs is the same (a CPU
// trainer on a machine without GPUs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ringmaster/v1/types.pb.h"

namespace ringmaster::agent {

struct InventoryOptions {
  std::string node_name;  // empty: the hostname
  std::string rack;
  std::vector<std::string> addresses;  // empty: the host's non-loopback IPv4 addresses
  std::string gpu_override;            // empty: detect (see the header comment)
};

// Parses an override string. InvalidArgument naming the group and what is wrong.
absl::StatusOr<std::vector<v1::GpuInfo>> ParseGpuOverride(std::string_view text);

// GPUs the CUDA runtime sees; empty without CUDA support or without a device.
std::vector<v1::GpuInfo> DetectGpus();

// Host memory as the agent reports it (NodeInventory.host_memory_*), in bytes; 0 when unknown.
struct HostMemory {
  uint64_t total = 0;
  uint64_t available = 0;
};

// MemTotal and MemAvailable of a /proc/meminfo text ("MemTotal:  16318480 kB"), each lowered to
// `cgroup_limit` (the text of cgroup v2 memory.max or v1 memory.limit_in_bytes; "max", empty or
// unreadable: no limit), so that an agent in a container reports what its ranks may use.
HostMemory ParseHostMemory(std::string_view meminfo, std::string_view cgroup_limit);

// This machine's: /proc/meminfo and the cgroup limit of this process's cgroup namespace root.
HostMemory ReadHostMemory();

// Collects this node's inventory.
absl::StatusOr<v1::NodeInventory> CollectInventory(const InventoryOptions& options);

}  // namespace ringmaster::agent
