// ctest-labels: unit
#include "trainer/train/device_choice.h"

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
