#include "trainer/cuda/engine/gpu_probe.h"

#include <cuda_runtime.h>

namespace ringmaster::trainer::cuda {

GpuProbe ProbeGpu() {
  GpuProbe p;
  p.engine_linked = true;
#ifdef CUDA_EMU
  p.emulated = true;  // compiled against the CPU emulator (RINGMASTER_CUDA_EMU)
#endif
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    p.error = cudaGetErrorString(e);
    (void)cudaGetLastError();  // not sticky: keep it out of later checks
    return p;
  }
  p.count = n;
  if (n <= 0) return p;
  cudaDeviceProp prop{};
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    p.count = 0;
    p.error = cudaGetErrorString(e);
    (void)cudaGetLastError();
    return p;
  }
  p.name = prop.name;
  p.compute_capability = prop.major * 10 + prop.minor;
  return p;
}

}  // namespace ringmaster::trainer::cuda
