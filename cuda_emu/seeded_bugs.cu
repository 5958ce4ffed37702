// Kernels with seeded bugs for the detector tests (seeded_bugs.h). Compiled by the emulator's
// build like the project's kernels, through the rewrite.
#include "cuda_emu/seeded_bugs.h"

namespace cuda_emu_test {
namespace {

__global__ void IotaKernel(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(i);
}

__global__ void WriteFirstHalfKernel(float* out, int n) {
  const int i = threadIdx.x;
  if (i < n / 2) out[i] = 1.0f;
}

__global__ void DoubleKernel(const float* in, float* out, int n) {
  const int i = threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}

__global__ void WriteOnePastEndKernel(float* out, int n) {
  const int i = threadIdx.x;
  if (i <= n) out[i] = 1.0f;  // the bug: <= n
}

__global__ void SharedOnePastEndKernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x + 1] = 1.0f;  // the bug: blockDim.x floats allocated, index up to blockDim.x
  __syncthreads();
  out[threadIdx.x] = smem[threadIdx.x];
}

__global__ void DivergentBarrierKernel(float* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2.0f;
    __syncthreads();
  }
}

__global__ void BarrierAfterReturnKernel(float* out) {
  if (threadIdx.x >= 32) return;  // the bug: the barrier below is not reached by every thread
  out[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] += 1.0f;
}

__global__ void TallGridKernel(float* out) {
  if (threadIdx.x == 0) out[blockIdx.y] = 1.0f;
}

__global__ void ShuffleAfterExitKernel(float* out) {
  const int lane = threadIdx.x;
  if (lane >= 16) return;
  const float v = __shfl_down_sync(0xffffffffu, static_cast<float>(lane), 1);
  out[lane] = v;
}

__global__ void TreeSumKernel(float* sum, bool missing_barrier) {
  __shared__ float s[256];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  for (int o = 128; o > 0; o >>= 1) {
    if (!missing_barrier) __syncthreads();
    if (static_cast<int>(threadIdx.x) < o) s[threadIdx.x] += s[threadIdx.x + o];
  }
  __syncthreads();
  if (threadIdx.x == 0) sum[0] = s[0];
}

__global__ void CrossBlockAddKernel(float* out, bool atomic) {
  if (threadIdx.x != 0) return;
  if (atomic) {
    atomicAdd(out, 1.0f);
  } else {
    out[0] = out[0] + 1.0f;
  }
}

__global__ void ReverseThroughGlobalKernel(float* buf, float* out, bool missing_barrier) {
  buf[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (!missing_barrier) __syncthreads();
  out[threadIdx.x] = buf[63 - threadIdx.x];
}

__global__ void WarpSumKernel(float* sum) {
  __shared__ float s[32];
  s[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncwarp();
  for (int o = 16; o > 0; o >>= 1) {
    float v = 0.0f;
    if (static_cast<int>(threadIdx.x) < o) v = s[threadIdx.x + o];
    __syncwarp();
    if (static_cast<int>(threadIdx.x) < o) s[threadIdx.x] += v;
    __syncwarp();
  }
  if (threadIdx.x == 0) sum[0] = s[0];
}

__global__ void RecordOrderKernel(int* order, int* next) {
  order[atomicAdd(next, 1)] = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
}

__device__ void BarrierHelper() { __syncthreads(); }

__global__ void BarrierInAHelperKernel(float* out) {
  out[threadIdx.x] = 0.0f;
  BarrierHelper();
  out[63 - threadIdx.x] += 1.0f;
}

__global__ void MisclassifiedBarrierKernel(float* out) {
  out[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] += 1.0f;
}

__global__ void MisclassifiedShuffleKernel(float* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
}

__global__ void MisclassifiedSharedKernel(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = 1.0f;
  out[threadIdx.x] = s[threadIdx.x];
}

}  // namespace

cudaError_t RecordOrder(int* order, int* next, int blocks, int threads) {
  RecordOrderKernel<<<blocks, threads>>>(order, next);
  return cudaGetLastError();
}
cudaError_t BarrierInAHelper(float* out) {
  BarrierInAHelperKernel<<<1, 64>>>(out);
  return cudaGetLastError();
}
cudaError_t MisclassifiedBarrier(float* out) {
  ::cuda_emu::LaunchFiberFree("MisclassifiedBarrierKernel", MisclassifiedBarrierKernel, 1, 64)(out);
  return cudaGetLastError();
}
cudaError_t MisclassifiedShuffle(float* out) {
  ::cuda_emu::LaunchFiberFree("MisclassifiedShuffleKernel", MisclassifiedShuffleKernel, 1, 32)(out);
  return cudaGetLastError();
}
cudaError_t MisclassifiedShared(float* out) {
  ::cuda_emu::LaunchFiberFree("MisclassifiedSharedKernel", MisclassifiedSharedKernel, 1, 64)(out);
  return cudaGetLastError();
}

cudaError_t Iota(float* out, int n, int threads, size_t dynamic_shared) {
  IotaKernel<<<(n + threads - 1) / threads, threads, dynamic_shared>>>(out, n);
  return cudaGetLastError();
}
cudaError_t WriteFirstHalf(float* out, int n) {
  WriteFirstHalfKernel<<<1, n>>>(out, n);
  return cudaGetLastError();
}
cudaError_t Double(const float* in, float* out, int n) {
  DoubleKernel<<<1, n>>>(in, out, n);
  return cudaGetLastError();
}
cudaError_t WriteOnePastEnd(float* out, int n) {
  WriteOnePastEndKernel<<<1, n + 1>>>(out, n);
  return cudaGetLastError();
}
cudaError_t SharedOnePastEnd(float* out) {
  SharedOnePastEndKernel<<<1, 64, 64 * sizeof(float)>>>(out);
  return cudaGetLastError();
}
cudaError_t DivergentBarrier(float* out) {
  DivergentBarrierKernel<<<1, 32>>>(out);
  return cudaGetLastError();
}
cudaError_t BarrierAfterReturn(float* out) {
  BarrierAfterReturnKernel<<<1, 64>>>(out);
  return cudaGetLastError();
}
cudaError_t TallGrid(float* out, unsigned grid_y) {
  TallGridKernel<<<dim3(1, grid_y), 32>>>(out);
  return cudaGetLastError();
}
cudaError_t ShuffleAfterExit(float* out) {
  ShuffleAfterExitKernel<<<1, 32>>>(out);
  return cudaGetLastError();
}
cudaError_t TreeSum(float* sum, bool missing_barrier) {
  TreeSumKernel<<<1, 256>>>(sum, missing_barrier);
  return cudaGetLastError();
}
cudaError_t WarpSum(float* sum) {
  WarpSumKernel<<<1, 32>>>(sum);
  return cudaGetLastError();
}
cudaError_t CrossBlockAdd(float* out, bool atomic) {
  CrossBlockAddKernel<<<4, 32>>>(out, atomic);
  return cudaGetLastError();
}
cudaError_t ReverseThroughGlobal(float* buf, float* out, bool missing_barrier) {
  ReverseThroughGlobalKernel<<<1, 64>>>(buf, out, missing_barrier);
  return cudaGetLastError();
}

}  // namespace cuda_emu_test
