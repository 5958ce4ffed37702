// The runtime API apart from memory: errors, devices, streams, events, function attributes.
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/device_properties.h"
#include "cuda_emu/launch.h"

namespace cuda_emu {
namespace {

struct Errors {
  std::mutex mu;
  cudaError_t sticky = cudaSuccess;
  std::string last_message;
  unsigned long count = 0;
  std::map<const void*, int> max_dynamic_shared;  // cudaFuncSetAttribute
};
Errors& E() {
  static Errors* e = new Errors;
  return *e;
}
thread_local cudaError_t tl_last = cudaSuccess;
thread_local int tl_device = 0;

}  // namespace

void ReportError(cudaError_t e, const std::string& what) {
  fprintf(stderr, "cuda_emu: %s\n", what.c_str());
  std::lock_guard<std::mutex> l(E().mu);
  if (tl_last == cudaSuccess) tl_last = e;
  if (e == cudaErrorLaunchFailure || e == cudaErrorIllegalAddress) E().sticky = e;
  E().last_message = what;
  ++E().count;
}

cudaError_t StickyError() {
  std::lock_guard<std::mutex> l(E().mu);
  return E().sticky;
}

void ResetErrorsForTest() {
  std::lock_guard<std::mutex> l(E().mu);
  E().sticky = cudaSuccess;
  tl_last = cudaSuccess;
}

unsigned long ErrorCount() {
  std::lock_guard<std::mutex> l(E().mu);
  return E().count;
}

std::string LastErrorMessage() {
  std::lock_guard<std::mutex> l(E().mu);
  return E().last_message;
}

int CurrentDevice() { return tl_device; }

int DeviceCount() {
  static const int n = [] {
    const char* v = getenv("CUDA_EMU_DEVICES");
    if (v == nullptr || *v == '\0') return 1;
    const int d = atoi(v);
    if (d < 1 || d > 64) {
      fprintf(stderr, "cuda_emu: CUDA_EMU_DEVICES=%s: expected 1..64\n", v);
      abort();
    }
    return d;
  }();
  return n;
}

int MaxDynamicShared(const void* kernel) {
  std::lock_guard<std::mutex> l(E().mu);
  auto it = E().max_dynamic_shared.find(kernel);
  return it == E().max_dynamic_shared.end() ? 48 << 10 : it->second;
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaGetLastError() {
  const cudaError_t e = cuda_emu::tl_last;
  cuda_emu::tl_last = cuda_emu::StickyError();
  return e;
}
cudaError_t cudaPeekAtLastError() { return cuda_emu::tl_last; }

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    default:
      return "cuda_emu: unknown error";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorIllegalAddress:
      return "cudaErrorIllegalAddress";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    default:
      return "cudaErrorUnknown";
  }
}

cudaError_t cudaGetDeviceCount(int* n) {
  if (n == nullptr) return cudaErrorInvalidValue;
  *n = cuda_emu::DeviceCount();
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= cuda_emu::DeviceCount()) {
    cuda_emu::ReportError(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(d) + "): " +
                                                      std::to_string(cuda_emu::DeviceCount()) +
                                                      " emulated device(s) (CUDA_EMU_DEVICES)");
    return cudaErrorInvalidDevice;
  }
  cuda_emu::tl_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  if (d == nullptr) return cudaErrorInvalidValue;
  *d = cuda_emu::tl_device;
  return cudaSuccess;
}

cudaError_t cudaDeviceReset() {
  cuda_emu::ResetErrorsForTest();
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  const size_t optin = cuda_emu::CurrentGeneration().shared_per_block_optin;
  if (value < 0 || static_cast<size_t>(value) > optin) {
    cuda_emu::ReportError(cudaErrorInvalidValue,
                          "cudaFuncSetAttribute(MaxDynamicSharedMemorySize, " +
                              std::to_string(value) + "): over this device's opt-in limit " +
                              std::to_string(optin));
    return cudaErrorInvalidValue;
  }
  std::lock_guard<std::mutex> l(cuda_emu::E().mu);
  cuda_emu::E().max_dynamic_shared[f] = value;
  return cudaSuccess;
}

}  // extern "C"
