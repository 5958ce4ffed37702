// Device memory: cudaMalloc allocations are host memory, 256-byte aligned like the real ones,
// filled with a signalling-NaN word pattern (poison detector) and followed by a guard zone
// (bounds detector; in AddressSanitizer builds the allocation is exact-size instead, so ASan
// reports the overrun with its source line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda_emu {

// The poison word and its quieted form (a float operation on a signalling NaN returns the quiet
// NaN with the same payload, so values computed from poison are recognised too).
inline constexpr uint32_t kPoisonWord = 0x7fa5a5a5u;
inline constexpr uint32_t kPoisonQuiet = 0x7fe5a5a5u;
inline bool IsPoisonWord(uint32_t w) {
  const uint32_t m = w & 0x7fffffffu;  // either sign
  return m == kPoisonWord || m == kPoisonQuiet;
}

// While one exists, device allocations are accessible from this thread (the host guard keeps
// them inaccessible otherwise; without CUDA_EMU_HOST_GUARD it does nothing). Kernel launches and
// the cuda* memory calls hold one. Nests; thread-safe. With memory protection keys (memory.cc)
// the access is the thread's and threads it starts; without, the whole process's.
class DeviceAccessScope {
 public:
  DeviceAccessScope();
  ~DeviceAccessScope();
  DeviceAccessScope(const DeviceAccessScope&) = delete;
  DeviceAccessScope& operator=(const DeviceAccessScope&) = delete;

 private:
  bool active_;
};

// Checks every allocation's guard zone; reports (and returns false) if one changed, naming the
// kernel that ran last.
bool CheckGuards(const char* after_kernel);

}  // namespace cuda_emu
