#include "cuda_emu/device_properties.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_emu/cuda_emu_runtime.h"

namespace cuda_emu {
namespace {

// Published limits of one product of each generation the trainer targets.
constexpr Generation kGenerations[] = {
    {6, 1, "Tesla P40 (cuda_emu)", 30, 48 << 10, 96 << 10, 2048, 24ull << 30, 3 << 20},
    {7, 0, "Tesla V100-SXM2-32GB (cuda_emu)", 80, 96 << 10, 96 << 10, 2048, 32ull << 30, 6 << 20},
    {8, 0, "NVIDIA A100-SXM4-80GB (cuda_emu)", 108, 163 << 10, 164 << 10, 2048, 80ull << 30,
     40 << 20},
    {9, 0, "NVIDIA H200 (cuda_emu)", 132, 227 << 10, 228 << 10, 2048, 141ull << 30, 50 << 20},
};

const Generation& Parse() {
  const char* v = getenv("CUDA_EMU_CC");
  if (v == nullptr || *v == '\0') return kGenerations[3];
  for (const Generation& g : kGenerations) {
    if (std::to_string(g.major) + "." + std::to_string(g.minor) == v) return g;
  }
  fprintf(stderr, "cuda_emu: CUDA_EMU_CC=%s: expected 6.1|7.0|8.0|9.0\n", v);
  abort();
}

}  // namespace

const Generation& CurrentGeneration() {
  static const Generation& g = Parse();
  return g;
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (p == nullptr || device < 0 || device >= cuda_emu::DeviceCount()) {
    return cudaErrorInvalidDevice;
  }
  const cuda_emu::Generation& g = cuda_emu::CurrentGeneration();
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "%s", g.name);
  p->totalGlobalMem = g.global_bytes;
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = g.shared_per_block_optin;
  p->sharedMemPerMultiprocessor = g.shared_per_sm;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024;
  p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = 65535;
  p->maxGridSize[2] = 65535;
  p->major = g.major;
  p->minor = g.minor;
  p->multiProcessorCount = g.sms;
  p->maxThreadsPerMultiProcessor = g.max_threads_per_sm;
  p->l2CacheSize = g.l2_bytes;
  p->totalConstMem = 64 << 10;
  p->pciDeviceID = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (value == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = p.maxThreadsPerBlock;
      break;
    case cudaDevAttrMaxBlockDimX:
      *value = p.maxThreadsDim[0];
      break;
    case cudaDevAttrMaxBlockDimY:
      *value = p.maxThreadsDim[1];
      break;
    case cudaDevAttrMaxBlockDimZ:
      *value = p.maxThreadsDim[2];
      break;
    case cudaDevAttrMaxGridDimX:
      *value = p.maxGridSize[0];
      break;
    case cudaDevAttrMaxGridDimY:
      *value = p.maxGridSize[1];
      break;
    case cudaDevAttrMaxGridDimZ:
      *value = p.maxGridSize[2];
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(p.sharedMemPerBlock);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
      *value = static_cast<int>(p.sharedMemPerMultiprocessor);
      break;
    case cudaDevAttrWarpSize:
      *value = 32;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = p.multiProcessorCount;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = p.major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = p.minor;
      break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = p.maxThreadsPerMultiProcessor;
      break;
    case cudaDevAttrL2CacheSize:
      *value = p.l2CacheSize;
      break;
    case cudaDevAttrMaxRegistersPerBlock:
      *value = p.regsPerBlock;
      break;
    default:
      cuda_emu::ReportError(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute " +
                                                       std::to_string(static_cast<int>(attr)) +
                                                       " is not emulated");
      return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // extern "C"
