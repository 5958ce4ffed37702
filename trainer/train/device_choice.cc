#include "trainer/train/device_choice.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

// The most ranks the CUDA engine trains together (cuda_engine.h).
constexpr int kCudaEngineMaxWorld = 1;

DeviceChoice ChooseAutoDevice(const GpuProbe& probe, int world_size) {
  using jobspec::Device;
  if (!probe.engine_linked) return {Device::kCpu, "this build has no CUDA engine"};
  if (probe.count <= 0) {
    return {Device::kCpu, absl::StrCat("no CUDA device visible", probe.error.empty() ? "" : " (",
                                       probe.error, probe.error.empty() ? "" : ")")};
  }
  const std::string seen =
      absl::StrCat(probe.name, ", sm_", probe.compute_capability, ", ", probe.count, " visible");
  if (probe.emulated) {
    return {Device::kCpu, absl::StrCat("the only CUDA device is the CPU emulator's (", seen,
                                       "); train.device: cuda runs on it explicitly")};
  }
  if (world_size > kCudaEngineMaxWorld) {
    return {Device::kCpu, absl::StrCat("the CUDA engine runs one rank for now, this job has ",
                                       world_size, "; seen: ", seen)};
  }
  return {Device::kCuda, seen};
}

}  // namespace ringmaster::trainer
