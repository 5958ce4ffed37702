// ctest-labels: gpu;emulated
// The shared-memory race detector on kernels built with the racecheck instrumentation
// (cuda_emu_add_kernels(RACECHECK)): a tree sum missing its barrier is reported with the source
// lines of both accesses, under every schedule, including the one where the sum comes out right;
// the correct kernels (block barriers, and warp-synchronous code ordered by __syncwarp) are not.
// The same for device memory: a plain read-modify-write of one value by several blocks of a
// launch, and a block exchanging values through global memory without a barrier, are reported
// (and pass silently with the detector off); atomics and the barrier version are not.
#include <gtest/gtest.h>

#include <string>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"
#include "cuda_emu/seeded_bugs.h"

namespace cuda_emu_test {
namespace {

class RacecheckTest : public ::testing::Test {
 protected:
  void SetUp() override { Restore(); }
  void TearDown() override { Restore(); }
  static void Restore() {
    cuda_emu::MutableOptions() = cuda_emu::Options{};
    cuda_emu::ResetErrorsForTest();
    (void)cudaGetLastError();
  }
};

TEST_F(RacecheckTest, MissingBarrierIsReportedUnderEverySchedule) {
  float* sum = nullptr;
  ASSERT_EQ(cudaMalloc(&sum, 4), cudaSuccess);
  for (auto s :
       {cuda_emu::Schedule::kForward, cuda_emu::Schedule::kReverse, cuda_emu::Schedule::kRandom}) {
    Restore();
    cuda_emu::MutableOptions().schedule = s;
    const unsigned long before = cuda_emu::ErrorCount();
    EXPECT_EQ(TreeSum(sum, /*missing_barrier=*/true), cudaErrorLaunchFailure)
        << cuda_emu::ScheduleName(s);
    ASSERT_GT(cuda_emu::ErrorCount(), before);
    const std::string m = cuda_emu::LastErrorMessage();
    EXPECT_NE(m.find("shared-memory race"), std::string::npos) << m;
    EXPECT_NE(m.find("seeded_bugs.cu:"), std::string::npos) << m;  // file:line of the accesses
  }
  cudaFree(sum);
}

TEST_F(RacecheckTest, WithoutTheDetectorTheReverseScheduleGivesTheRightSum) {
  float* sum = nullptr;
  ASSERT_EQ(cudaMalloc(&sum, 4), cudaSuccess);
  cuda_emu::MutableOptions().detectors &= ~cuda_emu::kRace;
  cuda_emu::MutableOptions().schedule = cuda_emu::Schedule::kReverse;
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(TreeSum(sum, /*missing_barrier=*/true), cudaSuccess);
  float h = 0.0f;
  ASSERT_EQ(cudaMemcpy(&h, sum, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 255.0f * 256.0f / 2.0f);  // the bug is invisible in the result
  EXPECT_EQ(cuda_emu::ErrorCount(), before);
  cudaFree(sum);
}

TEST_F(RacecheckTest, CorrectKernelsAreNotReported) {
  float* sum = nullptr;
  ASSERT_EQ(cudaMalloc(&sum, 4), cudaSuccess);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(TreeSum(sum, /*missing_barrier=*/false), cudaSuccess);
  EXPECT_EQ(WarpSum(sum), cudaSuccess);
  float h = 0.0f;
  ASSERT_EQ(cudaMemcpy(&h, sum, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 31.0f * 32.0f / 2.0f);
  EXPECT_EQ(cuda_emu::ErrorCount(), before) << cuda_emu::LastErrorMessage();
  cudaFree(sum);
}

TEST_F(RacecheckTest, GlobalMemoryRaceBetweenBlocksIsReported) {
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, 4), cudaSuccess);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(CrossBlockAdd(out, /*atomic=*/false), cudaErrorLaunchFailure);
  ASSERT_GT(cuda_emu::ErrorCount(), before);
  const std::string m = cuda_emu::LastErrorMessage();
  EXPECT_NE(m.find("global-memory race"), std::string::npos) << m;
  EXPECT_NE(m.find("different blocks"), std::string::npos) << m;
  EXPECT_NE(m.find("seeded_bugs.cu:"), std::string::npos) << m;
  cudaFree(out);
}

TEST_F(RacecheckTest, WithoutTheGlobalDetectorTheCrossBlockBugIsInvisible) {
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, 4), cudaSuccess);
  cuda_emu::MutableOptions().detectors &= ~cuda_emu::kGlobalRace;
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(CrossBlockAdd(out, /*atomic=*/false), cudaSuccess);
  float h = 0.0f;
  ASSERT_EQ(cudaMemcpy(&h, out, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 4.0f);  // blocks run one after another here; on a GPU they need not
  EXPECT_EQ(cuda_emu::ErrorCount(), before);
  cudaFree(out);
}

TEST_F(RacecheckTest, GlobalMemoryRaceWithinABlockIsReported) {
  float *buf = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 64 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, 64 * 4), cudaSuccess);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(ReverseThroughGlobal(buf, out, /*missing_barrier=*/true), cudaErrorLaunchFailure);
  ASSERT_GT(cuda_emu::ErrorCount(), before);
  const std::string m = cuda_emu::LastErrorMessage();
  EXPECT_NE(m.find("global-memory race"), std::string::npos) << m;
  EXPECT_NE(m.find("missing __syncthreads"), std::string::npos) << m;
  cudaFree(buf);
  cudaFree(out);
}

TEST_F(RacecheckTest, AtomicsAndBarriersAreNotGlobalRaces) {
  float *buf = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 64 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, 64 * 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, 4), cudaSuccess);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(CrossBlockAdd(out, /*atomic=*/true), cudaSuccess);
  float h = 0.0f;
  ASSERT_EQ(cudaMemcpy(&h, out, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h, 4.0f);
  EXPECT_EQ(ReverseThroughGlobal(buf, out, /*missing_barrier=*/false), cudaSuccess);
  float r[64];
  ASSERT_EQ(cudaMemcpy(r, out, sizeof(r), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(r[t], 63.0f - t) << t;
  EXPECT_EQ(cuda_emu::ErrorCount(), before) << cuda_emu::LastErrorMessage();
  cudaFree(buf);
  cudaFree(out);
}

}  // namespace
}  // namespace cuda_emu_test
