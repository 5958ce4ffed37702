// ctest-labels: gpu;emulated
// The runtime API the stand-ins build on (cuda_emu_runtime.h): allocations, devices, streams.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"

namespace {

TEST(CudaEmuRuntime, FindAllocationNamesTheContainingAllocation) {
  char* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  const auto a = cuda_emu::FindAllocation(p + 999);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->base, p);
  EXPECT_EQ(a->bytes, 1000u);
  EXPECT_EQ(a->device, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  int on_stack = 0;
  EXPECT_FALSE(cuda_emu::FindAllocation(&on_stack).has_value());
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_FALSE(cuda_emu::FindAllocation(p).has_value());
}

TEST(CudaEmuRuntime, DevicesFollowTheEnvironment) {
  const char* env = getenv("CUDA_EMU_DEVICES");
  const int want = env ? atoi(env) : 1;
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, want);
  EXPECT_EQ(cudaSetDevice(n), cudaErrorInvalidDevice);
  cuda_emu::ResetErrorsForTest();
  (void)cudaGetLastError();
  int d = -1;
  ASSERT_EQ(cudaSetDevice(n - 1), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&d), cudaSuccess);
  EXPECT_EQ(d, n - 1);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  EXPECT_EQ(cuda_emu::FindAllocation(p)->device, n - 1);
  cudaFree(p);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(CudaEmuRuntime, StreamsAndEventsRunInOrder) {
  cudaStream_t s;
  cudaEvent_t a, b;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64), cudaSuccess);
  float h[16] = {1, 2, 3}, back[16] = {};
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, h, 64, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 4, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back, d, 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[2], 3.0f);
  float ms = -1.0f;
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  cudaFree(d);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
}

// Lazy streams (streams.h): work waits in its stream until something waits for it.
class LazyStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_emu::MutableOptions().lazy_streams = true;
    ASSERT_EQ(cudaStreamCreate(&a_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&b_), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&e_), cudaSuccess);
    for (float** p : {&x_, &y_, &z_}) ASSERT_EQ(cudaMalloc(p, sizeof(float) * 4), cudaSuccess);
    const float ones[4] = {1, 1, 1, 1};
    ASSERT_EQ(cudaMemcpy(x_, ones, sizeof(ones), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(y_, 0, sizeof(float) * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(z_, 0, sizeof(float) * 4), cudaSuccess);
  }
  void TearDown() override {
    for (float* p : {x_, y_, z_}) cudaFree(p);
    cudaEventDestroy(e_);
    cudaStreamDestroy(a_);
    cudaStreamDestroy(b_);
    cuda_emu::MutableOptions().lazy_streams = false;
  }
  float First(const float* d) {
    float h[4] = {-1, -1, -1, -1};
    EXPECT_EQ(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
    return h[0];
  }

  cudaStream_t a_ = nullptr, b_ = nullptr;
  cudaEvent_t e_ = nullptr;
  float *x_ = nullptr, *y_ = nullptr, *z_ = nullptr;
};

// Stream a copies x -> y; stream b copies y -> z. Without an event between them b runs first
// (it is the stream the host waits for), so z gets y's old zeros: the missing dependency shows.
TEST_F(LazyStreams, AMissingCrossStreamDependencyReadsOldBytes) {
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, sizeof(float) * 4, cudaMemcpyDeviceToDevice, a_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(z_, y_, sizeof(float) * 4, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(b_), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(a_), cudaErrorNotReady);  // a still holds its copy
  float h[4] = {-1, -1, -1, -1};
  ASSERT_EQ(cudaMemcpyAsync(h, z_, sizeof(h), cudaMemcpyDeviceToHost, b_), cudaSuccess);
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_EQ(First(y_), 1.0f);  // the blocking copy drained a
}

TEST_F(LazyStreams, AnEventWaitOrdersTheStreams) {
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, sizeof(float) * 4, cudaMemcpyDeviceToDevice, a_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e_, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, e_, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(z_, y_, sizeof(float) * 4, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e_), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e_), cudaSuccess);
  float h[4] = {-1, -1, -1, -1};
  ASSERT_EQ(cudaMemcpyAsync(h, z_, sizeof(h), cudaMemcpyDeviceToHost, b_), cudaSuccess);
  EXPECT_EQ(h[0], 1.0f);
}

// From pageable memory the bytes are taken at the call; into pinned memory they arrive when the
// stream runs, so a host read before the wait sees the old bytes.
TEST_F(LazyStreams, PageableSourcesAreStagedAndPinnedDestinationsWait) {
  float src[4] = {5, 5, 5, 5};
  ASSERT_EQ(cudaMemcpyAsync(y_, src, sizeof(src), cudaMemcpyHostToDevice, a_), cudaSuccess);
  src[0] = 7;  // reusing the pageable buffer at once is allowed
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, sizeof(float) * 4), cudaSuccess);
  pinned[0] = -1;
  ASSERT_EQ(cudaMemcpyAsync(pinned, y_, sizeof(float) * 4, cudaMemcpyDeviceToHost, a_),
            cudaSuccess);
  EXPECT_EQ(pinned[0], -1.0f);  // not yet: the host did not wait
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(pinned[0], 5.0f);
  cudaFreeHost(pinned);
}

// The default: work runs at the call, so the same missing dependency goes unseen.
TEST(CudaEmuRuntime, EagerStreamsHideAMissingDependency) {
  ASSERT_FALSE(cuda_emu::GetOptions().lazy_streams);
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&b), cudaSuccess);
  float *x, *y, *z;
  for (float** p : {&x, &y, &z}) ASSERT_EQ(cudaMalloc(p, sizeof(float)), cudaSuccess);
  const float one = 1;
  ASSERT_EQ(cudaMemcpy(x, &one, sizeof(one), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, x, sizeof(float), cudaMemcpyDeviceToDevice, a), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(z, y, sizeof(float), cudaMemcpyDeviceToDevice, b), cudaSuccess);
  float h = -1;
  ASSERT_EQ(cudaMemcpyAsync(&h, z, sizeof(h), cudaMemcpyDeviceToHost, b), cudaSuccess);
  EXPECT_EQ(h, 1.0f);
  for (float* p : {x, y, z}) cudaFree(p);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

}  // namespace
