#include "cuda_emu/launch.h"

#include <string>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/memory.h"
#include "cuda_emu/options.h"
#include "cuda_emu/scheduler.h"

namespace cuda_emu {
namespace {

std::string Dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

}  // namespace

bool CheckLaunch(const char* name, const void* kernel, dim3 grid, dim3 block, size_t shared) {
  if (StickyError() != cudaSuccess) return false;  // a failed kernel poisons the context
  const Options& o = GetOptions();
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    ReportError(cudaErrorInvalidConfiguration,
                std::string(name) + ": empty launch grid " + Dims(grid) + " block " + Dims(block));
    return false;
  }
  if (!o.On(kLaunchShape)) return true;
  if (threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535) {
    ReportError(cudaErrorInvalidConfiguration,
                std::string(name) + ": invalid launch configuration grid " + Dims(grid) +
                    " block " + Dims(block) +
                    " (limits: 1024 threads a block, block z <= 64, grid y,z <= 65535)");
    return false;
  }
  const int limit = MaxDynamicShared(kernel);
  if (shared > static_cast<size_t>(limit)) {
    ReportError(cudaErrorInvalidValue,
                std::string(name) + ": " + std::to_string(shared) +
                    " bytes of dynamic shared memory > the kernel's limit " +
                    std::to_string(limit) +
                    " (above 48 KiB needs cudaFuncSetAttribute(MaxDynamicSharedMemorySize))");
    return false;
  }
  return true;
}

bool CheckPointerArgument(const char* name, int index, const void* p) {
  if (p == nullptr || !GetOptions().On(kKernelPointers)) return true;
  const std::optional<Allocation> a = FindAllocation(p);
  if (a) return true;  // device memory, or pinned host memory (device-accessible on a GPU too)
  ReportError(cudaErrorInvalidValue,
              std::string(name) + ": argument " + std::to_string(index) +
                  " is not a device pointer (host memory passed to a kernel?)");
  return false;
}

void RunLaunch(const char* name, dim3 grid, dim3 block, size_t shared, void (*body)(void*),
               void* closure, bool fiber_free) {
  DeviceAccessScope access;  // kernels (and the guard check) read device memory
  if (RunGrid(name, grid, block, shared, body, closure, fiber_free)) CheckGuards(name);
}

}  // namespace cuda_emu
