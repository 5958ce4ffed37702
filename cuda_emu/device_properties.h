// The emulated devices: CUDA_EMU_DEVICES of them (default 1), all of the generation named by
// CUDA_EMU_CC (6.1 Tesla P40, 7.0 V100, 8.0 A100, 9.0 H200; default 9.0), so code that picks a
// precision or a shared-memory size by generation can be tested for each.
#pragma once

#include <cstddef>

namespace cuda_emu {

struct Generation {
  int major, minor;
  const char* name;
  int sms;
  size_t shared_per_block_optin;  // cudaFuncAttributeMaxDynamicSharedMemorySize may go this high
  size_t shared_per_sm;
  int max_threads_per_sm;
  size_t global_bytes;
  int l2_bytes;
};

const Generation& CurrentGeneration();

}  // namespace cuda_emu
