// For gpu-labelled tests: whether a CUDA device (real or emulated) exists. Link
// gpu_test_main.cc as the test's main: it exits 77 (ctest's skip code) when none does, after
// the tests themselves skipped with GTEST_SKIP.
#pragma once

#include <cuda_runtime.h>

namespace ringmaster::trainer::cuda {

inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace ringmaster::trainer::cuda
