// Force-included (-include) into every CUDA source compiled for the emulator as host C++ (the
// rewrite step, cuda_emu_rewrite.py, first turns <<<>>> launches and extern __shared__ into C++).
// The toolkit's headers supply the types (dim3, cudaError_t, __nv_bfloat16, ...); the emulator
// supplies the device side (device_builtins.h) and a CPU libcudart (the cuda_emu library).
#pragma once

#define CUDA_EMU 1

#include <cuda_runtime.h>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/detectors.h"
#include "cuda_emu/device_builtins.h"
#include "cuda_emu/launch.h"
#include "cuda_emu/scheduler.h"

// Static __shared__ variables: one copy per worker thread, and a worker runs one block at a time,
// so one copy per running block (its contents are stale from the previous block, as on a GPU).
#undef __shared__
#define __shared__ static thread_local
#undef __launch_bounds__
#define __launch_bounds__(...)

// The C++ overloads <cuda_runtime.h> declares only under nvcc.
template <class T>
cudaError_t cudaFuncSetAttribute(T* f, cudaFuncAttribute a, int v) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(f), a, v);
}
