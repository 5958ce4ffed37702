// Small kernels with seeded bugs (and their correct twins) for the detector tests. Each launcher
// launches on the default stream and returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

namespace cuda_emu_test {

// out[i] = i for i < n, in blocks of `threads` (any shape, for the launch-shape detector).
cudaError_t Iota(float* out, int n, int threads, size_t dynamic_shared);
// Writes only the first half of out (the poison detector's never-written second half).
cudaError_t WriteFirstHalf(float* out, int n);
// out[i] = 2 * in[i] (reads in; the poison detector follows uninitialised input into out).
cudaError_t Double(const float* in, float* out, int n);
// Writes out[0..n], one past the end (bounds detector).
cudaError_t WriteOnePastEnd(float* out, int n);
// Writes dynamic shared memory one element past its end (bounds detector, shared).
cudaError_t SharedOnePastEnd(float* out);
// __syncthreads on two different lines of an if/else (barrier detector).
cudaError_t DivergentBarrier(float* out);
// Threads 32.. of a 64-thread block return before a __syncthreads the others reach (barrier).
cudaError_t BarrierAfterReturn(float* out);
// out[blockIdx.y] = 1 over a grid of (1, grid_y) blocks (grid-dimension limits).
cudaError_t TallGrid(float* out, unsigned grid_y);
// Lanes 16..31 return, then the warp shuffles with a full mask (warp detector).
cudaError_t ShuffleAfterExit(float* out);
// Tree sum of 256 values in shared memory, with or without the barrier between levels
// (schedules and the race detector). sum[0] = 0 + 1 + ... + 255 when correct.
cudaError_t TreeSum(float* sum, bool missing_barrier);
// A warp-synchronous reduction through shared memory, ordered by __syncwarp (no race).
cudaError_t WarpSum(float* sum);
// Thread 0 of each of 4 blocks adds 1 to out[0]: a plain read-modify-write (a global-memory race
// between blocks; the sequential emulation still gets 4) or an atomicAdd (no race).
cudaError_t CrossBlockAdd(float* out, bool atomic);
// One block of 64: buf[t] = t, then (after a __syncthreads unless missing) out[t] = buf[63 - t]
// (a global-memory race within a block when the barrier is missing).
cudaError_t ReverseThroughGlobal(float* buf, float* out, bool missing_barrier);

// The fast path (fiber-free kernels, docs/cuda.md). Each thread of `blocks` blocks of `threads`
// takes the next slot of order[] (atomicAdd on *next) and writes its global thread index there:
// order[] is the order in which the threads ran. No barrier: runs on the fast path.
cudaError_t RecordOrder(int* order, int* next, int blocks, int threads);
// out[t] = 1 for 64 threads, through a __device__ helper that calls __syncthreads: the rewrite
// step follows the call and keeps the kernel on fibers.
cudaError_t BarrierInAHelper(float* out);
// Seeded misclassifications: kernels launched on the fast path by hand (::cuda_emu::
// LaunchFiberFree) although they wait at a __syncthreads, shuffle within a warp, or declare a
// __shared__ array. Each launch must fail naming the kernel and the call.
cudaError_t MisclassifiedBarrier(float* out);
cudaError_t MisclassifiedShuffle(float* out);
cudaError_t MisclassifiedShared(float* out);

}  // namespace cuda_emu_test
