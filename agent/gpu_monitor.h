// GPU figures for the agent's /metrics: memory used and total, and utilisation, per device, from
// NVIDIA's management library (NVML) where the driver provides it. The library is opened at run
// time (dlopen of libnvidia-ml.so.1), so the agent builds and runs on machines without a driver;
// there the monitor is simply absent. Labels `gpu` (index) and `UUID` match NVIDIA's
// dcgm-exporter, so our series join with its DCGM_FI_DEV_* ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::agent {

struct GpuReading {
  int index = 0;
  std::string uuid;  // "GPU-…"
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  double utilization = 0;  // ratio 0..1 of time a kernel ran over the driver's sample period
};

class GpuMonitor {
 public:
  virtual ~GpuMonitor() = default;
  // One reading per device; a device whose query fails is left out.
  virtual std::vector<GpuReading> Read() = 0;
};

// NVML through dlopen. NotFound when libnvidia-ml.so.1 is not installed (no NVIDIA driver);
// Unavailable when it is but does not initialise or lacks a function (the message says which).
absl::StatusOr<std::unique_ptr<GpuMonitor>> OpenNvmlMonitor();

}  // namespace ringmaster::agent
