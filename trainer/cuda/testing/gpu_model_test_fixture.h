// A gtest fixture for tests that run CUDA BERT models: skips without a device, else gives them a
// stream and a cuBLASLt handle. `Base` is ::testing::Test or a TestWithParam.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "trainer/cuda/kernels/gemm.h"
#include "trainer/cuda/testing/gpu_test_util.h"

namespace ringmaster::trainer::cuda {

template <typename Base = ::testing::Test>
class GpuModelTest : public Base {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    auto g = Gemm::Create();
    ASSERT_TRUE(g.ok()) << g.status();
    gemm_ = std::move(*g);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
};

}  // namespace ringmaster::trainer::cuda
