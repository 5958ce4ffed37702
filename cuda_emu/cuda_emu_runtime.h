// The emulator's CPU runtime as seen by other emulated libraries (the cuBLAS(Lt) and NCCL
// stand-ins) and by tests. The CUDA runtime API itself (cudaMalloc, cudaMemcpy, streams, ...) is
// implemented with the toolkit's own declarations from <cuda_runtime.h>; this header adds what a
// stand-in needs on top. These names are stable.
//
// Device memory is host memory: a device pointer may be dereferenced by emulator code (and by
// stand-ins) directly. Streams are in-order queues run at the call or, under
// CUDA_EMU_STREAMS=lazy, when something waits for them (streams.h); a stand-in drains its stream
// (cudaStreamSynchronize) before it works, which is a legal order.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <string>

namespace cuda_emu {

// The cudaMalloc allocation (or cudaMallocHost buffer, device -1) containing p, or nullopt.
struct Allocation {
  void* base = nullptr;
  size_t bytes = 0;
  int device = 0;  // the current device of the thread that allocated it; -1 for host pinned
};
std::optional<Allocation> FindAllocation(const void* p);

// The calling host thread's current device (cudaSetDevice/cudaGetDevice), 0 by default, and the
// number of devices (env CUDA_EMU_DEVICES, default 1).
int CurrentDevice();
int DeviceCount();

// Reports an emulator error: printed to stderr with `what`, becomes the thread's last error
// (cudaGetLastError/cudaPeekAtLastError) and, for errors that corrupt a context on a real GPU
// (cudaErrorLaunchFailure, cudaErrorIllegalAddress), the sticky error every later call returns.
void ReportError(cudaError_t e, const std::string& what);

// The sticky error (cudaSuccess when none). Stand-ins return it before doing any work.
cudaError_t StickyError();

// Tests only: clears the last and sticky errors so one process can seed several failures.
void ResetErrorsForTest();

// Number of reports since start; tests assert that a detector reported (or did not).
unsigned long ErrorCount();
// The text of the most recent report ("" if none).
std::string LastErrorMessage();

// Grids run so far in this process, by path: `fast` ran each CUDA thread to completion without
// fibers (a kernel the rewrite step found fiber-free, CUDA_EMU_FAST_PATH not 0), `fibers` ran
// every thread as a fiber. Tests assert which path a kernel took.
struct LaunchPathCounts {
  unsigned long fast = 0, fibers = 0;
};
LaunchPathCounts GetLaunchPathCounts();
// Tests only: restarts the count of launches that seeds each launch's random orders, so that a
// sequence of launches run again draws the same orders (on either path).
void ResetLaunchCountForTest();

}  // namespace cuda_emu
