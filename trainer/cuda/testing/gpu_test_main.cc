// main() of the CUDA engine's gpu tests: the gtest run, then exit 77 (skipped) where no CUDA
// device exists (every test skipped itself with GTEST_SKIP).
#include <gtest/gtest.h>

#include "trainer/cuda/testing/gpu_test_util.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0 && !ringmaster::trainer::cuda::HaveGpu()) return 77;
  return rc;
}
