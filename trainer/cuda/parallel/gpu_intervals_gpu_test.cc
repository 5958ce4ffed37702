// ctest-labels: gpu
// GpuIntervals: intervals are read once and the events reused; a timed wait of one stream for
// another ends after the work it waits for, so its length is the waiting stream's stall. Under
// the emulator the tests run with lazy streams (docs/cuda.md): the awaited stream's work runs
// only when the waiting stream reaches its wait, so an interval whose second event were
// recorded before the wait would end before that work, and the tests fail. Event times there
// are host times: only the order and the sums are checked, not what a GPU would take.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "trainer/cuda/kernels/kernels.h"
#include "trainer/cuda/parallel/gpu_intervals.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#ifdef CUDA_EMU
#include "cuda_emu/options.h"
#endif

namespace ringmaster::trainer::cuda {
namespace {

constexpr size_t kFloats = 1 << 16;
constexpr int kKernels = 4;  // of work on the awaited stream

// Two streams and a buffer; lazy streams under the emulator for the test's duration.
class GpuIntervalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
#ifdef CUDA_EMU
    lazy_before_ = cuda_emu::GetOptions().lazy_streams;
    cuda_emu::MutableOptions().lazy_streams = true;
#endif
    ASSERT_EQ(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x_), kFloats * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(x_, 0, kFloats * sizeof(float)), cudaSuccess);
  }
  void TearDown() override {
    if (x_ != nullptr) cudaFree(x_);
    for (cudaStream_t s : {compute_, comm_}) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
#ifdef CUDA_EMU
    cuda_emu::MutableOptions().lazy_streams = lazy_before_;
#endif
  }
  // Enqueues kernels on `s`.
  void Work(cudaStream_t s) {
    for (int i = 0; i < kKernels; ++i) ASSERT_EQ(ScaleInPlace(x_, kFloats, 1.0f, s), cudaSuccess);
  }
  static float Ms(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    return ms;
  }

  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  float* x_ = nullptr;
  bool lazy_before_ = false;
};

TEST_F(GpuIntervalsTest, CollectReadsEachIntervalOnceAndReusesTheEvents) {
  GpuIntervals t;
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<size_t> a = t.Begin(compute_);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(*a, 0u);
    Work(compute_);
    ASSERT_TRUE(t.End(*a, compute_).ok());
    absl::StatusOr<size_t> b = t.Begin(compute_);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, 1u);
    ASSERT_TRUE(t.End(*b, compute_).ok());
    EXPECT_EQ(t.size(), 2u);
    ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
    absl::StatusOr<std::vector<double>> s = t.Collect();
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->size(), 2u);
    // The first interval holds the kernels, the second nothing.
    EXPECT_GT((*s)[0], 0.0) << "round " << round;
    EXPECT_GE((*s)[1], 0.0);
    EXPECT_EQ(t.size(), 0u);
    absl::StatusOr<std::vector<double>> again = t.Collect();
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->empty()) << "an interval read twice";
  }
}

// The compute stream waits for work on the other stream: the timed wait ends after that work,
// and (under the emulator, where the awaited work runs inside the wait) is at least as long.
TEST_F(GpuIntervalsTest, ATimedWaitEndsAfterTheWorkItWaitsFor) {
  cudaEvent_t work_begin = nullptr, work_end = nullptr, ready = nullptr;
  ASSERT_EQ(cudaEventCreate(&work_begin), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&work_end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), cudaSuccess);
  GpuIntervals t;
  ASSERT_EQ(cudaEventRecord(work_begin, comm_), cudaSuccess);
  Work(comm_);
  ASSERT_EQ(cudaEventRecord(work_end, comm_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(ready, comm_), cudaSuccess);
  ASSERT_TRUE(t.TimedWait(compute_, ready).ok());
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(cudaStreamSynchronize(compute_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(comm_), cudaSuccess);
  EXPECT_GE(Ms(work_end, t.end_event(0)), 0.0f) << "the stall ended before the awaited work";
  const float work_ms = Ms(work_begin, work_end);
  absl::StatusOr<std::vector<double>> s = t.Collect();
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_GE((*s)[0], 0.0);
#ifdef CUDA_EMU
  // Lazy streams: the compute stream reached its wait before the other stream ran anything.
  EXPECT_GT(work_ms, 0.0f);
  EXPECT_GE((*s)[0], work_ms * 1e-3 * (1 - 1e-5)) << "a stall shorter than the awaited work";
#else
  (void)work_ms;  // on a GPU the other stream may start before the wait is reached
#endif
  for (cudaEvent_t e : {work_begin, work_end, ready}) cudaEventDestroy(e);
}

}  // namespace
}  // namespace ringmaster::trainer::cuda
