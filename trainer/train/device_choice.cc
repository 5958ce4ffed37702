#include "trainer/train/device_choice.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {

DeviceChoice ChooseAutoDevice(const GpuProbe& probe, int world_size, bool nccl_built) {
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
  if (world_size > 1 && !nccl_built) {
    return {Device::kCpu, absl::StrCat("this job has ", world_size,
                                       " ranks and this build has no NCCL for the CUDA engine's "
                                       "collectives; seen: ",
                                       seen)};
  }
  return {Device::kCuda, seen};
}

}  // namespace ringmaster::trainer
