// ctest-labels: gpu;emulated
// Each emulator detector against a seeded bug (seeded_bugs.cu): caught with the detector on, and
// unnoticed (or a wrong answer) with it off, which shows the detector is what catches it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"
#include "cuda_emu/seeded_bugs.h"

namespace cuda_emu_test {
namespace {

using cuda_emu::Detector;

class DetectorTest : public ::testing::Test {
 protected:
  void SetUp() override { Restore(); }
  void TearDown() override { Restore(); }
  static void Restore() {
    cuda_emu::MutableOptions() = cuda_emu::Options{};
    cuda_emu::ResetErrorsForTest();
    (void)cudaGetLastError();
  }
  static void Disable(Detector d) { cuda_emu::MutableOptions().detectors &= ~d; }
  // Reports since `before`, and whether the last one mentions `needle`.
  static bool Reported(unsigned long before, const std::string& needle) {
    return cuda_emu::ErrorCount() > before &&
           cuda_emu::LastErrorMessage().find(needle) != std::string::npos;
  }
};

float* DeviceFloats(int n) {
  float* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
  return p;
}

TEST_F(DetectorTest, BlockOver1024ThreadsIsRefusedAndRunsWithTheDetectorOff) {
  float* out = DeviceFloats(2048);
  unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(Iota(out, 2048, 2048, 0), cudaErrorInvalidConfiguration);
  EXPECT_TRUE(Reported(before, "invalid launch configuration"));
  Disable(cuda_emu::kLaunchShape);
  before = cuda_emu::ErrorCount();
  EXPECT_EQ(Iota(out, 2048, 2048, 0), cudaSuccess);  // the bug goes unnoticed
  EXPECT_EQ(cuda_emu::ErrorCount(), before);
  std::vector<float> h(2048);
  ASSERT_EQ(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[2047], 2047.0f);
  cudaFree(out);
}

TEST_F(DetectorTest, DynamicSharedOver48KiBNeedsTheAttribute) {
  float* out = DeviceFloats(256);
  const size_t big = 64 << 10;
  EXPECT_EQ(Iota(out, 256, 256, big), cudaErrorInvalidValue);
  EXPECT_NE(cuda_emu::LastErrorMessage().find("cudaFuncSetAttribute"), std::string::npos);
  Disable(cuda_emu::kLaunchShape);
  EXPECT_EQ(Iota(out, 256, 256, big), cudaSuccess);
  cudaFree(out);
}

TEST_F(DetectorTest, HostPointerPassedToAKernel) {
  std::vector<float> host(64);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(Iota(host.data(), 64, 64, 0), cudaErrorInvalidValue);
  EXPECT_TRUE(Reported(before, "argument 0 is not a device pointer"));
  EXPECT_EQ(host[5], 0.0f);  // not run
  Disable(cuda_emu::kKernelPointers);
  EXPECT_EQ(Iota(host.data(), 64, 64, 0), cudaSuccess);  // "works" on the CPU: unnoticed
  EXPECT_EQ(host[5], 5.0f);
}

TEST_F(DetectorTest, CudaMemcpyWithSwappedPointers) {
  float* dev = DeviceFloats(16);
  std::vector<float> host(16, 1.0f);
  // Host → device, but the pointers swapped: a device pointer dereferenced as host memory.
  EXPECT_EQ(cudaMemcpy(host.data(), dev, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_NE(cuda_emu::LastErrorMessage().find("do not match the direction"), std::string::npos);
  Disable(cuda_emu::kMemcpyDirection);
  Disable(cuda_emu::kPoison);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, 64, cudaMemcpyHostToDevice), cudaSuccess);
  cudaFree(dev);
}

TEST_F(DetectorTest, NeverWrittenOutputReachesTheHost) {
  float* out = DeviceFloats(64);
  ASSERT_EQ(WriteFirstHalf(out, 64), cudaSuccess);
  std::vector<float> h(64);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(cudaMemcpy(h.data(), out, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_TRUE(Reported(before, "32 of 64 words copied to the host were never written"));
  EXPECT_TRUE(Reported(before, "first at byte 128"));
  (void)cudaGetLastError();  // the failed copy is the last error, as on a GPU
  cudaFree(out);
  Disable(cuda_emu::kPoison);  // allocations are zero-filled: the missing half reads 0
  out = DeviceFloats(64);
  ASSERT_EQ(WriteFirstHalf(out, 64), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(h.data(), out, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[40], 0.0f);
  cudaFree(out);
}

TEST_F(DetectorTest, ValueComputedFromNeverWrittenInput) {
  float* in = DeviceFloats(32);  // never uploaded
  float* out = DeviceFloats(32);
  ASSERT_EQ(Double(in, out, 32), cudaSuccess);
  std::vector<float> h(32);
  EXPECT_EQ(cudaMemcpy(h.data(), out, 128, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_NE(cuda_emu::LastErrorMessage().find("computed from never-written memory"),
            std::string::npos);
  cudaFree(in);
  cudaFree(out);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(CUDA_EMU_TEST_ASAN)
TEST_F(DetectorTest, GlobalWritePastTheEndOfAnAllocation) {
  float* out = DeviceFloats(32);
  const unsigned long before = cuda_emu::ErrorCount();
  WriteOnePastEnd(out, 32);
  EXPECT_TRUE(Reported(before, "wrote past the end of the 128-byte allocation"));
  EXPECT_EQ(cuda_emu::StickyError(), cudaErrorIllegalAddress);
  cuda_emu::ResetErrorsForTest();
  Disable(cuda_emu::kBounds);
  const unsigned long quiet = cuda_emu::ErrorCount();
  EXPECT_EQ(WriteOnePastEnd(out, 32), cudaSuccess);
  EXPECT_EQ(cuda_emu::ErrorCount(), quiet);
  cudaFree(out);
}
#else
// Under AddressSanitizer allocations are exact-size and ASan itself reports the line.
TEST_F(DetectorTest, GlobalWritePastTheEndOfAnAllocationUnderAsan) {
  float* out = DeviceFloats(32);
  EXPECT_DEATH(WriteOnePastEnd(out, 32), "heap-buffer-overflow");
  cudaFree(out);
}
#endif

#if !defined(__SANITIZE_ADDRESS__) && !defined(CUDA_EMU_TEST_ASAN)
// Host guard (CUDA_EMU_HOST_GUARD=1): host code writing through a device pointer faults and is
// reported; without the guard the emulator's device memory is plain host memory and the bug
// goes unnoticed. A correct program (launch, copies, memset, free) runs unchanged under it.
TEST_F(DetectorTest, HostDereferenceOfADevicePointerUnderTheHostGuard) {
  EXPECT_DEATH(
      {
        cuda_emu::MutableOptions().host_guard = true;
        float* p = DeviceFloats(4);
        p[1] = 3.0f;  // the bug: device memory written by the host
      },
      "host code dereferenced device memory at 0x[0-9a-f]+ \\(byte 4 of a 16-byte cudaMalloc");
  float* p = DeviceFloats(4);  // guard off (the default)
  p[1] = 3.0f;
  float h[4] = {};
  ASSERT_EQ(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);  // poison
  EXPECT_EQ(h[1], 3.0f);  // unnoticed: the write went through
  cudaFree(p);
}

TEST_F(DetectorTest, CorrectProgramsRunUnderTheHostGuard) {
  cuda_emu::MutableOptions().host_guard = true;
  float* out = DeviceFloats(64);
  ASSERT_EQ(cudaMemset(out, 0, 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(Iota(out, 64, 32, 0), cudaSuccess);
  float h[64];
  ASSERT_EQ(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(h[i], static_cast<float>(i)) << i;
  EXPECT_EQ(cudaFree(out), cudaSuccess);
}
#endif

TEST_F(DetectorTest, SharedWritePastTheEnd) {
  float* out = DeviceFloats(64);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(SharedOnePastEnd(out), cudaErrorLaunchFailure);
  EXPECT_TRUE(Reported(before, "wrote past the end of 256 bytes of dynamic shared memory"));
  cuda_emu::ResetErrorsForTest();
  (void)cudaGetLastError();
  Disable(cuda_emu::kBounds);
  EXPECT_EQ(SharedOnePastEnd(out), cudaSuccess);
  cudaFree(out);
}

TEST_F(DetectorTest, SyncthreadsInDivergentCode) {
  float* out = DeviceFloats(32);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(DivergentBarrier(out), cudaErrorLaunchFailure);
  EXPECT_TRUE(Reported(before, "__syncthreads in divergent code"));
  EXPECT_TRUE(Reported(before, "seeded_bugs.cu"));  // both lines named
  cuda_emu::ResetErrorsForTest();
  (void)cudaGetLastError();
  Disable(cuda_emu::kBarrier);
  EXPECT_EQ(DivergentBarrier(out), cudaSuccess);
  cudaFree(out);
}

TEST_F(DetectorTest, SyncthreadsAfterSomeThreadsReturned) {
  float* out = DeviceFloats(64);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(BarrierAfterReturn(out), cudaErrorLaunchFailure);
  EXPECT_TRUE(Reported(before, "reached by 32 of 64 threads"));
  cuda_emu::ResetErrorsForTest();
  (void)cudaGetLastError();
  Disable(cuda_emu::kBarrier);  // exited threads then count as arrived, as on most hardware
  EXPECT_EQ(BarrierAfterReturn(out), cudaSuccess);
  cudaFree(out);
}

TEST_F(DetectorTest, GridYOver65535IsRefused) {
  float* out = DeviceFloats(65536);
  EXPECT_EQ(TallGrid(out, 65535), cudaSuccess);
  EXPECT_EQ(TallGrid(out, 65536), cudaErrorInvalidConfiguration);
  EXPECT_NE(cuda_emu::LastErrorMessage().find("grid (1,65536,1)"), std::string::npos);
  (void)cudaGetLastError();
  Disable(cuda_emu::kLaunchShape);
  EXPECT_EQ(TallGrid(out, 65536), cudaSuccess);
  std::vector<float> h(65536);
  ASSERT_EQ(cudaMemcpy(h.data(), out, h.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[65535], 1.0f);
  cudaFree(out);
}

TEST_F(DetectorTest, ShuffleNamingExitedLanes) {
  float* out = DeviceFloats(32);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(ShuffleAfterExit(out), cudaErrorLaunchFailure);
  EXPECT_TRUE(Reported(before, "which has exited"));
  cuda_emu::ResetErrorsForTest();
  (void)cudaGetLastError();
  Disable(cuda_emu::kWarp);
  EXPECT_EQ(ShuffleAfterExit(out), cudaSuccess);
  cudaFree(out);
}

// A tree sum without its barrier is right under some orders of threads and wrong under others:
// which is why the gpu tests run under several schedules.
TEST_F(DetectorTest, MissingSyncthreadsIsCaughtUnderSomeSchedule) {
  float* sum = DeviceFloats(1);
  const float want = 255.0f * 256.0f / 2.0f;
  auto run = [&](cuda_emu::Schedule s, bool missing) {
    cuda_emu::MutableOptions().schedule = s;
    cuda_emu::MutableOptions().seed = 17;
    EXPECT_EQ(TreeSum(sum, missing), cudaSuccess);
    float h = 0.0f;
    // A sum that read never-written shared memory is NaN, and the poison detector fails the
    // copy too; the value is what counts here.
    const cudaError_t copied = cudaMemcpy(&h, sum, 4, cudaMemcpyDeviceToHost);
    EXPECT_TRUE(copied == cudaSuccess || (missing && std::isnan(h)));
    (void)cudaGetLastError();
    return h;
  };
  int wrong = 0;
  for (auto s :
       {cuda_emu::Schedule::kForward, cuda_emu::Schedule::kReverse, cuda_emu::Schedule::kRandom}) {
    EXPECT_EQ(run(s, false), want) << cuda_emu::ScheduleName(s);
    wrong += run(s, true) != want;
  }
  EXPECT_GE(wrong, 1);
  EXPECT_EQ(run(cuda_emu::Schedule::kReverse, true), want);  // reverse alone misses the bug
  cudaFree(sum);
}

TEST_F(DetectorTest, DevicePropertiesFollowTheConfiguredGeneration) {
  cudaDeviceProp p;
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(major, p.major);
  const char* cc = getenv("CUDA_EMU_CC");
  if (cc == nullptr) {
    EXPECT_EQ(p.major, 9);
    EXPECT_EQ(p.multiProcessorCount, 132);
  } else {
    EXPECT_EQ(std::to_string(p.major) + "." + std::to_string(p.minor), cc);
  }
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void*>(&Iota),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(p.sharedMemPerBlockOptin) + 1),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace cuda_emu_test
