// What a kernel launch moves and computes, declared by its launcher for the shape it launches
// (as a kernel benchmark needs for GB/s): the distinct device bytes it reads and writes (each
// byte once, as if every re-read came from cache: the DRAM traffic a perfect cache would leave)
// and its arithmetic (nominal FLOPs, for reference; the roofline uses bytes). Under the emulator
// each declaration goes with the next launch of the calling host thread into the step census
// (cuda_emu/census.h, cuda_emu/census.cc); in a real build it compiles to nothing.
// Kernels that read or write less than their buffers' full extent say so where declared; the
// emulator's cross-check (census_bytes_gpu_test) compares every declaration with the bytes the
// kernel actually touched at small shapes.
#pragma once

#include <cstddef>

#if RINGMASTER_CUDA_EMU
#include "cuda_emu/census.h"
#endif

namespace ringmaster::trainer::cuda {

struct KernelCost {
  double bytes_read = 0;
  double bytes_written = 0;
  double flops = 0;
};

inline void DeclareKernelCost(const KernelCost& c) {
#if RINGMASTER_CUDA_EMU
  ::cuda_emu::DeclareNextLaunchCost(c.bytes_read, c.bytes_written, c.flops);
#else
  (void)c;
#endif
}

// n floats read r times over and written w times over (element-wise kernels).
inline KernelCost ElementwiseCost(size_t n, int reads, int writes, double flops_each,
                                  double element_bytes = 4) {
  const double e = static_cast<double>(n) * element_bytes;
  return {reads * e, writes * e, flops_each * static_cast<double>(n)};
}

}  // namespace ringmaster::trainer::cuda
