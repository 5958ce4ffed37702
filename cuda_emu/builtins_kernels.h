// Kernels exercising the emulator's device built-ins for builtins_test.cc. Each writes its
// results to device memory; the test checks them against values computed on the host.
#pragma once

#include <cuda_runtime.h>

namespace cuda_emu_test {

// One warp, 32 lanes; out has 10 × 32 ints: lane ids through shfl (idx, up, down, xor, and
// width 8 xor), ballot, any, all, __syncthreads_count, threadIdx.x of a 2D block's (x, y).
cudaError_t WarpOps(int* out, cudaStream_t stream);
// atomics over grid (4 blocks × 64 threads): counters[0] += 1 (int), fsum += 1.0f,
// dsum += 0.5, counters[1] = max(tid), counters[2] via atomicCAS increments.
cudaError_t Atomics(int* counters, float* fsum, double* dsum);
// bf16/half round trips of in[i] (n ≤ 256): out_bf16[i] = float(bf16(in[i])), likewise half.
cudaError_t Conversions(const float* in, float* out_bf16, float* out_half, int n);
// Dynamic shared memory in a 3D block (4, 2, 2) over a 2D grid (2, 3): out[block][thread] =
// linear thread id written through shared memory in reverse order.
cudaError_t Shapes(int* out);
// Math intrinsics of x[i]: __expf, rsqrtf, erff, __fdividef(x, 3), fmaf(x, x, 1).
cudaError_t Math(const float* x, float* out, int n);

}  // namespace cuda_emu_test
