// ctest-labels: unit
#include "trainer/parallel/device_choice.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster::trainer {
namespace {

using jobspec::Device;
using ::testing::HasSubstr;

TEST(ChooseAutoDeviceTest, AVisibleGpuIsChosenNamingIt) {
  const DeviceChoice c = ChooseAutoDevice({true, 1, false, "NVIDIA H200", 90, ""}, 1, true);
  EXPECT_EQ(c.device, Device::kCuda);
  EXPECT_THAT(c.reason, HasSubstr("NVIDIA H200, sm_90"));
}

TEST(ChooseAutoDeviceTest, NoDeviceOrNoEngineMeansTheCpu) {
  DeviceChoice c =
      ChooseAutoDevice({true, 0, false, "", 0, "no CUDA-capable device is detected"}, 1, true);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_THAT(c.reason, HasSubstr("no CUDA-capable device is detected"));
  c = ChooseAutoDevice({false, 1, false, "NVIDIA H200", 90, ""}, 1, true);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_THAT(c.reason, HasSubstr("no CUDA engine"));
}

TEST(ChooseAutoDeviceTest, TheEmulatorsDeviceIsNeverChosenAutomatically) {
  const DeviceChoice c =
      ChooseAutoDevice({true, 1, true, "NVIDIA H200 (cuda_emu)", 90, ""}, 1, true);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_THAT(c.reason, HasSubstr("emulator"));
}

TEST(CheckCudaDeviceTest, TheEmulatorRunsCudaJobsOnlyWhereTestsOptIn) {
  const GpuProbe emu{true, 1, true, "NVIDIA H200 (cuda_emu)", 90, ""};
  for (const char* opt_in : {static_cast<const char*>(nullptr), "", "0", "yes"}) {
    const absl::Status s = CheckCudaDevice(emu, opt_in);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << (opt_in ? opt_in : "unset");
    EXPECT_THAT(std::string(s.message()), HasSubstr("CUDA emulator"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("RINGMASTER_EMULATED_CUDA_OK=1"));
  }
  EXPECT_TRUE(CheckCudaDevice(emu, "1").ok());
  EXPECT_THAT(EmulatedCudaWarning(emu), HasSubstr("CUDA emulator"));
  // A real GPU (or none: the engine says so) needs no opt-in and logs no warning.
  const GpuProbe real{true, 1, false, "NVIDIA H200", 90, ""};
  EXPECT_TRUE(CheckCudaDevice(real, nullptr).ok());
  EXPECT_TRUE(CheckCudaDevice({true, 0, false, "", 0, "no CUDA-capable device"}, nullptr).ok());
  EXPECT_EQ(EmulatedCudaWarning(real), "");
}

TEST(ChooseAutoDeviceTest, SeveralRanksTakeGpusWhereNcclIsBuilt) {
  DeviceChoice c = ChooseAutoDevice({true, 1, false, "NVIDIA H200", 90, ""}, 2, true);
  EXPECT_EQ(c.device, Device::kCuda);
  c = ChooseAutoDevice({true, 1, false, "NVIDIA H200", 90, ""}, 2, false);
  EXPECT_EQ(c.device, Device::kCpu);
  EXPECT_THAT(c.reason, HasSubstr("no NCCL"));
  // One rank needs no collectives: NCCL does not matter.
  c = ChooseAutoDevice({true, 1, false, "NVIDIA H200", 90, ""}, 1, false);
  EXPECT_EQ(c.device, Device::kCuda);
}

}  // namespace
}  // namespace ringmaster::trainer
