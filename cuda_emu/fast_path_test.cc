// ctest-labels: gpu;emulated
// The fast path (docs/cuda.md): a kernel the rewrite step finds fiber-free runs without fibers,
// in the same schedules and under the same detectors as on fibers; a kernel with a barrier keeps
// fibers; a barrier, warp collective or shared memory reached on the fast path (a seeded
// misclassification) fails the launch with an error naming the kernel and the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"
#include "cuda_emu/seeded_bugs.h"

namespace cuda_emu_test {
namespace {

using cuda_emu::Schedule;

constexpr Schedule kSchedules[] = {Schedule::kForward, Schedule::kReverse, Schedule::kRandom};

class FastPathTest : public ::testing::Test {
 protected:
  void SetUp() override { Restore(); }
  void TearDown() override { Restore(); }
  static void Restore() {
    cuda_emu::MutableOptions() = cuda_emu::Options{};
    cuda_emu::ResetErrorsForTest();
    (void)cudaGetLastError();
  }
  // Grids run on each path by `f`.
  template <typename F>
  static cuda_emu::LaunchPathCounts Count(F f) {
    const cuda_emu::LaunchPathCounts before = cuda_emu::GetLaunchPathCounts();
    f();
    const cuda_emu::LaunchPathCounts after = cuda_emu::GetLaunchPathCounts();
    return {after.fast - before.fast, after.fibers - before.fibers};
  }
  static void Expect(const std::string& needle) {
    EXPECT_NE(cuda_emu::LastErrorMessage().find(needle), std::string::npos)
        << "missing \"" << needle << "\" in: " << cuda_emu::LastErrorMessage();
  }
};

template <typename T>
T* Device(size_t n) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return p;
}

TEST_F(FastPathTest, BarrierFreeKernelRunsOnTheFastPathAndBarrierKernelsOnFibers) {
  float* out = Device<float>(256);
  auto c = Count([&] { EXPECT_EQ(Iota(out, 256, 64, 0), cudaSuccess); });
  EXPECT_EQ(c.fast, 1u);  // one grid of 4 blocks
  EXPECT_EQ(c.fibers, 0u);
  std::vector<float> h(256);
  ASSERT_EQ(cudaMemcpy(h.data(), out, 1024, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(h[i], static_cast<float>(i));
  c = Count([&] { EXPECT_EQ(TreeSum(out, false), cudaSuccess); });  // __syncthreads, __shared__
  EXPECT_EQ(c.fast, 0u);
  EXPECT_EQ(c.fibers, 1u);
  c = Count([&] { EXPECT_EQ(WarpSum(out), cudaSuccess); });  // __syncwarp
  EXPECT_EQ(c.fibers, 1u);
  // The barrier sits in a __device__ helper: the rewrite step follows the call.
  c = Count([&] { EXPECT_EQ(BarrierInAHelper(out), cudaSuccess); });
  EXPECT_EQ(c.fast, 0u);
  EXPECT_EQ(c.fibers, 1u);
  ASSERT_EQ(cudaMemcpy(h.data(), out, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[63], 1.0f);
  cudaFree(out);
}

TEST_F(FastPathTest, FastPathOffRunsEveryKernelOnFibers) {
  float* out = Device<float>(256);
  cuda_emu::MutableOptions().fast_path = false;  // CUDA_EMU_FAST_PATH=0
  const auto c = Count([&] { EXPECT_EQ(Iota(out, 256, 64, 0), cudaSuccess); });
  EXPECT_EQ(c.fast, 0u);
  EXPECT_EQ(c.fibers, 1u);
  cudaFree(out);
}

// The threads run in the schedule's order, the same order as on fibers: forward in index order,
// reverse backwards, random a permutation drawn from the seed and the launch count, identical on
// both paths.
TEST_F(FastPathTest, ThreadsRunInTheScheduleOrderOnBothPaths) {
  constexpr int kBlocks = 3, kThreads = 64, kN = kBlocks * kThreads;
  int* order = Device<int>(kN);
  int* next = Device<int>(1);
  auto run = [&](Schedule s, bool fast) {
    cuda_emu::MutableOptions().schedule = s;
    cuda_emu::MutableOptions().block_order = s;
    cuda_emu::MutableOptions().seed = 7;
    cuda_emu::MutableOptions().fast_path = fast;
    cuda_emu::ResetLaunchCountForTest();
    EXPECT_EQ(cudaMemset(next, 0, 4), cudaSuccess);
    const auto c =
        Count([&] { EXPECT_EQ(RecordOrder(order, next, kBlocks, kThreads), cudaSuccess); });
    EXPECT_EQ(c.fast, fast ? 1u : 0u);
    std::vector<int> h(kN);
    EXPECT_EQ(cudaMemcpy(h.data(), order, kN * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  std::vector<int> forward(kN);
  std::iota(forward.begin(), forward.end(), 0);
  std::vector<int> reverse(forward.rbegin(), forward.rend());
  EXPECT_EQ(run(Schedule::kForward, true), forward);
  EXPECT_EQ(run(Schedule::kReverse, true), reverse);
  const std::vector<int> random = run(Schedule::kRandom, true);
  EXPECT_NE(random, forward);
  EXPECT_NE(random, reverse);
  EXPECT_TRUE(std::is_permutation(random.begin(), random.end(), forward.begin()));
  for (Schedule s : kSchedules) {
    EXPECT_EQ(run(s, true), run(s, false)) << cuda_emu::ScheduleName(s);
  }
  cudaFree(order);
  cudaFree(next);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(CUDA_EMU_TEST_ASAN)
TEST_F(FastPathTest, OutOfBoundsWriteIsCaughtUnderEverySchedule) {
  for (Schedule s : kSchedules) {
    Restore();
    cuda_emu::MutableOptions().schedule = s;
    float* out = Device<float>(32);
    const unsigned long before = cuda_emu::ErrorCount();
    const auto c = Count([&] { WriteOnePastEnd(out, 32); });
    EXPECT_EQ(c.fast, 1u) << cuda_emu::ScheduleName(s);
    EXPECT_GT(cuda_emu::ErrorCount(), before) << cuda_emu::ScheduleName(s);
    Expect("wrote past the end of the 128-byte allocation");
    EXPECT_EQ(cuda_emu::StickyError(), cudaErrorIllegalAddress);
    cudaFree(out);
  }
}
#endif

TEST_F(FastPathTest, PoisonReadsAreCaughtUnderEverySchedule) {
  for (Schedule s : kSchedules) {
    Restore();
    cuda_emu::MutableOptions().schedule = s;
    float* in = Device<float>(32);  // never written
    float* out = Device<float>(32);
    const auto c = Count([&] { EXPECT_EQ(Double(in, out, 32), cudaSuccess); });
    EXPECT_EQ(c.fast, 1u) << cuda_emu::ScheduleName(s);
    std::vector<float> h(32);
    EXPECT_EQ(cudaMemcpy(h.data(), out, 128, cudaMemcpyDeviceToHost), cudaErrorInvalidValue)
        << cuda_emu::ScheduleName(s);
    Expect("computed from never-written memory");
    (void)cudaGetLastError();
    // A never-written half of an output, too.
    float* half = Device<float>(32);
    ASSERT_EQ(WriteFirstHalf(half, 32), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), half, 128, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    Expect("16 of 32 words copied to the host were never written");
    (void)cudaGetLastError();
    cudaFree(in);
    cudaFree(out);
    cudaFree(half);
  }
}

TEST_F(FastPathTest, BarrierReachedOnTheFastPathFailsNamingTheKernelAndTheCall) {
  float* out = Device<float>(64);
  const unsigned long before = cuda_emu::ErrorCount();
  EXPECT_EQ(MisclassifiedBarrier(out), cudaErrorLaunchFailure);
  EXPECT_GT(cuda_emu::ErrorCount(), before);
  Expect("MisclassifiedBarrierKernel block (0,0,0) thread (0,0,0): reached __syncthreads at ");
  Expect("seeded_bugs.cu:");
  Expect("on the fast path");
  Expect("CUDA_EMU_FAST_PATH=0");
  EXPECT_EQ(cuda_emu::StickyError(), cudaErrorLaunchFailure);
  Restore();
  EXPECT_EQ(MisclassifiedShuffle(out), cudaErrorLaunchFailure);
  Expect("MisclassifiedShuffleKernel block (0,0,0) thread (0,0,0): reached __shfl_xor_sync at ");
  Expect("seeded_bugs.cu:");
  Restore();
  EXPECT_EQ(MisclassifiedShared(out), cudaErrorLaunchFailure);
  Expect("MisclassifiedSharedKernel block (0,0,0) thread (0,0,0): reached a __shared__ variable");
  Expect("seeded_bugs.cu:");
  // With the fast path off the same launches run on fibers, correctly.
  Restore();
  cuda_emu::MutableOptions().fast_path = false;
  EXPECT_EQ(MisclassifiedBarrier(out), cudaSuccess);
  std::vector<float> h(64);
  ASSERT_EQ(cudaMemcpy(h.data(), out, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[17], 2.0f);
  cudaFree(out);
}

}  // namespace
}  // namespace cuda_emu_test
