#include "cuda_emu/emu_device_range.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_format.h"
#include "cuda_emu/cuda_emu_runtime.h"

namespace cuda_emu {

std::string CheckDeviceRange(const void* p, size_t bytes, int* device) {
  if (bytes == 0) return "";
  if (p == nullptr) return "null pointer";
  const std::optional<Allocation> a = FindAllocation(p);
  if (!a.has_value()) return absl::StrFormat("%p is not device memory (not from cudaMalloc)", p);
  if (a->device < 0) {
    return absl::StrFormat("%p is pinned host memory (cudaMallocHost), not device memory", p);
  }
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(a->base);
  const size_t offset = begin - base;
  if (offset + bytes > a->bytes) {
    return absl::StrFormat(
        "%d bytes from %p run %d bytes past the end of its cudaMalloc allocation (%p, %d bytes)",
        bytes, p, offset + bytes - a->bytes, a->base, a->bytes);
  }
  if (device != nullptr) *device = a->device;
  return "";
}

}  // namespace cuda_emu
