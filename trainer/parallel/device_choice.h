// `train.device: auto` for a trainer started without a plan: the GPU when a real one is visible,
// the CPU otherwise. Under a coordinator the plan decides instead (RINGMASTER_DEVICE, set by the
// agent for each rank from the GPU it was given).
#pragma once

#include <string>

#include "absl/status/status.h"
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

// The variable by which a test environment lets an emulated build (RINGMASTER_CUDA_EMU) run
// train.device: cuda; the test harness sets it (CMakeLists.txt, tests/CMakeLists.txt) and agents
// pass it to their trainers.
inline constexpr char kEmulatedCudaOptIn[] = "RINGMASTER_EMULATED_CUDA_OK";

// train.device: cuda on the devices `probe` saw. Their being the CPU emulator's (a test build,
// hundreds of times slower than the CPU engine) is refused with FailedPrecondition, naming the
// emulator and the ways out, unless `opt_in` (the value of RINGMASTER_EMULATED_CUDA_OK, null when
// unset) is "1". Anything else is left to the engine (no device, no engine in this build).
absl::Status CheckCudaDevice(const GpuProbe& probe, const char* opt_in);

// The warning line a run of the CUDA engine on the emulator logs (empty on a real GPU).
std::string EmulatedCudaWarning(const GpuProbe& probe);

}  // namespace ringmaster::trainer
