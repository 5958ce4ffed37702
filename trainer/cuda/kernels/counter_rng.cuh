// The counter-based uniform of cpu::UniformAt (trainer/model/cpu_ops.h), callable from host and
// device code, so CPU and GPU dropout masks are bit-identical for a seed. Keep the two in sync;
// kernels_gpu_test checks device values against cpu::UniformAt.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RM_HOST_DEVICE __host__ __device__
#else
#define RM_HOST_DEVICE
#endif

namespace ringmaster::trainer::cuda {

RM_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0,1) with 24 random bits: exact in fp32, so host and device agree bit for bit.
RM_HOST_DEVICE inline float UniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(Mix64(seed ^ Mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

}  // namespace ringmaster::trainer::cuda
