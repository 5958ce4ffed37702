#include "trainer/parallel/device_choice.h"

#include <string_view>

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
    return {Device::kCpu,
            absl::StrCat("the only CUDA device is the CPU emulator's (", seen,
                         "); train.device: cuda runs on it only where tests allow it, ",
                         kEmulatedCudaOptIn, "=1")};
  }
  if (world_size > 1 && !nccl_built) {
    return {Device::kCpu, absl::StrCat("this job has ", world_size,
                                       " ranks and this build has no NCCL for the CUDA engine's "
                                       "collectives; seen: ",
                                       seen)};
  }
  return {Device::kCuda, seen};
}

absl::Status CheckCudaDevice(const GpuProbe& probe, const char* opt_in) {
  if (!probe.emulated) return absl::OkStatus();
  if (opt_in != nullptr && std::string_view(opt_in) == "1") return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "train.device: cuda: this ringmaster-trainer was built with the CUDA emulator "
      "(RINGMASTER_CUDA_EMU=ON, a test build), which runs the CUDA engine on the CPU hundreds of "
      "times slower than train.device: cpu. Use train.device: cpu (or auto), or a build with nvcc "
      "(cmake -DRINGMASTER_CUDA_EMU=OFF, the default) on a machine with a GPU; tests opt in with ",
      kEmulatedCudaOptIn, "=1"));
}

std::string EmulatedCudaWarning(const GpuProbe& probe) {
  if (!probe.emulated) return "";
  return absl::StrCat(
      "train.device: cuda runs on the CUDA emulator (RINGMASTER_CUDA_EMU, ", probe.name,
      "): every kernel executes on the CPU, hundreds of times slower than train.device: cpu; "
      "allowed by ",
      kEmulatedCudaOptIn, "=1 (tests only)");
}

}  // namespace ringmaster::trainer
