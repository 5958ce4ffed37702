// cudaPointerGetAttributes for the emulated runtime, which does not define it yet: a weak
// definition, so a runtime that adds its own (strong) one silently replaces this file. Answers
// from the allocation table as CUDA 11+ does: cudaMalloc memory is cudaMemoryTypeDevice on its
// device, cudaMallocHost memory cudaMemoryTypeHost, anything else cudaMemoryTypeUnregistered
// (with cudaSuccess, not an error).
#include <cuda_runtime.h>

#include <optional>

#include "cuda_emu/cuda_emu_runtime.h"

__attribute__((weak)) cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                                           const void* ptr) {
  if (attributes == nullptr) return cudaErrorInvalidValue;
  *attributes = cudaPointerAttributes{};
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;  // CUDA's value for unregistered memory.
  const std::optional<cuda_emu::Allocation> a = cuda_emu::FindAllocation(ptr);
  if (!a.has_value()) return cudaSuccess;
  if (a->device < 0) {
    attributes->type = cudaMemoryTypeHost;
    attributes->device = cuda_emu::CurrentDevice();
    attributes->hostPointer = const_cast<void*>(ptr);
    attributes->devicePointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  attributes->type = cudaMemoryTypeDevice;
  attributes->device = a->device;
  attributes->devicePointer = const_cast<void*>(ptr);
  return cudaSuccess;
}
