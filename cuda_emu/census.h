// The step census (issue #28): exact counts of what host code asks of the device, taken by the
// emulator at each call: kernel launches by name (with the bytes and FLOPs each launcher
// declares for its shape, kernel_cost.h), cuBLAS(Lt) matmuls with their FLOPs and operand types,
// blocking host synchronisations, copies, memsets and allocations. Speed is designed from these
// counts and a roofline model (cuda_emu/census.cc) where no GPU is at hand.
//
// Counting is a few integer additions under a mutex per call, always on; nothing is reported
// unless CensusSnapshot() is read. CUDA_EMU_CENSUS=dry (or SetCensusDryRun) also skips the work
// itself: kernels and matmuls are counted but not run, and device memory is mapped zero-filled
// without poison, so a full-size step (BERT-base) is counted in seconds. Values computed on the
// device are then zeros, so dry counts hold only for code whose host decisions do not depend on
// device values other than zero (the census tool states which).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace cuda_emu {

struct CensusKernel {
  int64_t launches = 0;
  int64_t declared = 0;  // launches that came with a declared cost
  double bytes_read = 0, bytes_written = 0, flops = 0;
};

struct CensusGemm {
  int64_t calls = 0;
  double flops = 0;  // 2·m·n·k·batch
};

struct Census {
  std::map<std::string, CensusKernel> kernels;  // by kernel name
  std::map<std::string, CensusGemm> gemms;      // by "api A/B/C/D types" (e.g. bf16/bf16/f32/f32)
  // Blocking host synchronisations: the host waits for the device.
  int64_t stream_syncs = 0, device_syncs = 0, event_syncs = 0;
  int64_t sync_copies = 0;         // cudaMemcpy host<->device (blocks until done)
  int64_t pageable_async_d2h = 0;  // cudaMemcpyAsync into pageable memory (blocks)
  int64_t pageable_async_h2d = 0;  // cudaMemcpyAsync from pageable memory (staged, not waiting)
  int64_t async_copies = 0;        // the other cudaMemcpyAsync (device or pinned memory)
  double copy_bytes = 0;           // all copies
  double d2d_copy_bytes = 0;       // device-to-device copies (read once, written once)
  int64_t memsets = 0;
  double memset_bytes = 0;
  int64_t mallocs = 0, frees = 0, host_allocs = 0;
  double malloc_bytes = 0;

  int64_t Launches() const;
  int64_t BlockingSyncs() const {
    return stream_syncs + device_syncs + event_syncs + sync_copies + pageable_async_d2h;
  }
};

Census CensusSnapshot();
void CensusReset();

// Dry run: count, do not execute (see above). Set before the first allocation.
bool CensusDryRun();
void SetCensusDryRun(bool on);

// The cost of the next kernel launch issued by this host thread (kernel_cost.h's
// DeclareKernelCost); consumed by that launch.
void DeclareNextLaunchCost(double bytes_read, double bytes_written, double flops);

// Touched bytes (kernels built with cuda_emu_add_kernels(RACECHECK) only, whose every load,
// store and atomic reaches the emulator): while recording, each byte of device memory a kernel
// reads or writes is collected under the kernel's name. TakeTouched returns the distinct bytes
// read and written per kernel name since the last call and clears them. For cross-checking the
// declared costs (kernel_cost.h) at small shapes; slow.
struct TouchedBytes {
  double bytes_read = 0, bytes_written = 0;
};
void SetTouchRecording(bool on);
bool TouchRecording();
std::map<std::string, TouchedBytes> TakeTouched();
void RecordTouch(const char* kernel, const void* p, size_t bytes, bool write);

// Called by the runtime at each call (launch.h, memory.cc, streams.cc, the cuBLAS stand-ins).
void CensusLaunch(const char* name);
void CensusGemmCall(const char* api, int a_type, int b_type, int c_type, int d_type, double flops);
enum class CensusSync { kStream, kDevice, kEvent };
void CensusSyncCall(CensusSync what);
void CensusCopy(bool blocking_sync_copy, bool async, bool dst_pageable, bool src_pageable,
                bool host_involved, bool device_to_device, double bytes);
void CensusMemset(double bytes);
void CensusAlloc(bool device, double bytes);
void CensusFree();

}  // namespace cuda_emu
