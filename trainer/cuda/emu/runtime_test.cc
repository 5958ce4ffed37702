// ctest-labels: gpu;emulated
// The runtime API the stand-ins build on (cuda_emu_runtime.h): allocations, devices, streams.
#include <gtest/gtest.h>

#include <cstdlib>

#include "trainer/cuda/emu/cuda_emu_runtime.h"

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

}  // namespace
