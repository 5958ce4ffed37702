// `train.device: auto` for a trainer started without a plan: the GPU when a real one is visible,
// the CPU otherwise. Under a coordinator the plan decides instead (RINGMASTER_DEVICE, set by the
// agent for each rank from the GPU it was given).
#pragma once

#include <string>

#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

// What the CUDA runtime shows this process (CUDA_VISIBLE_DEVICES applies).
struct GpuProbe {
  bool engine_linked = false;  // this binary has the CUDA engine
  int count = 0;               // visible devices
  bool emulated = false;       // the devices are the CPU emulator's, not GPUs
  std::string name;            // device 0
  int compute_capability = 0;  // device 0, e.g. 90
  std::string error;           // why none is visible, when the runtime said
};

struct DeviceChoice {
  jobspec::Device device = jobspec::Device::kCpu;
  std::string reason;  // for the log line: what was seen
};

// Resolves auto for a job of `world_size` ranks. The emulator's device is never chosen
// automatically: it runs the CUDA engine orders of magnitude slower than the CPU engine;
// `device: cuda` runs on it explicitly. Several ranks take their GPUs only where the binary has
// NCCL (`nccl_built`): the CUDA engine's collectives need it.
DeviceChoice ChooseAutoDevice(const GpuProbe& probe, int world_size, bool nccl_built);

}  // namespace ringmaster::trainer
