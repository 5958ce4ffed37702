// Device built-ins under the emulator (builtins_kernels.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_emu/builtins_kernels.h"

namespace cuda_emu_test {
namespace {

__global__ void WarpOpsKernel(int* out) {
  const int lane = threadIdx.x + threadIdx.y * blockDim.x;  // a 2D block (8, 4): one warp
  const unsigned full = 0xffffffffu;
  out[0 * 32 + lane] = __shfl_sync(full, lane, 5);
  out[1 * 32 + lane] = __shfl_up_sync(full, lane, 3);
  out[2 * 32 + lane] = __shfl_down_sync(full, lane, 3);
  out[3 * 32 + lane] = __shfl_xor_sync(full, lane, 1);
  out[4 * 32 + lane] = __shfl_xor_sync(full, lane, 4, 8);
  out[5 * 32 + lane] = static_cast<int>(__ballot_sync(full, lane % 3 == 0));
  out[6 * 32 + lane] = __any_sync(full, lane == 31);
  out[7 * 32 + lane] = __all_sync(full, lane < 31);
  out[8 * 32 + lane] = __syncthreads_count(lane % 2 == 0);
  out[9 * 32 + lane] = static_cast<int>(threadIdx.x * 100 + threadIdx.y);
}

__global__ void AtomicsKernel(int* counters, float* fsum, double* dsum) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&counters[0], 1);
  atomicAdd(fsum, 1.0f);
  atomicAdd(dsum, 0.5);
  atomicMax(&counters[1], tid);
  int old = counters[2];
  while (true) {
    const int seen = atomicCAS(&counters[2], old, old + 1);
    if (seen == old) break;
    old = seen;
  }
}

__global__ void ConversionsKernel(const float* in, float* out_bf16, float* out_half, int n) {
  const int i = threadIdx.x;
  if (i >= n) return;
  out_bf16[i] = __bfloat162float(__float2bfloat16(in[i]));
  out_half[i] = __half2float(__float2half(in[i]));
}

__global__ void ShapesKernel(int* out) {
  extern __shared__ int tile[];
  const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int n = blockDim.x * blockDim.y * blockDim.z;
  tile[n - 1 - t] = t;
  __syncthreads();
  const int block = blockIdx.x + gridDim.x * blockIdx.y;
  out[block * n + t] = tile[n - 1 - t];
}

__global__ void MathKernel(const float* x, float* out, int n) {
  const int i = threadIdx.x;
  if (i >= n) return;
  out[5 * i + 0] = __expf(x[i]);
  out[5 * i + 1] = rsqrtf(x[i]);
  out[5 * i + 2] = erff(x[i]);
  out[5 * i + 3] = __fdividef(x[i], 3.0f);
  out[5 * i + 4] = fmaf(x[i], x[i], 1.0f);
}

}  // namespace

cudaError_t WarpOps(int* out, cudaStream_t stream) {
  WarpOpsKernel<<<1, dim3(8, 4), 0, stream>>>(out);
  return cudaGetLastError();
}
cudaError_t Atomics(int* counters, float* fsum, double* dsum) {
  AtomicsKernel<<<4, 64>>>(counters, fsum, dsum);
  return cudaGetLastError();
}
cudaError_t Conversions(const float* in, float* out_bf16, float* out_half, int n) {
  ConversionsKernel<<<1, 256>>>(in, out_bf16, out_half, n);
  return cudaGetLastError();
}
cudaError_t Shapes(int* out) {
  ShapesKernel<<<dim3(2, 3), dim3(4, 2, 2), 16 * sizeof(int)>>>(out);
  return cudaGetLastError();
}
cudaError_t Math(const float* x, float* out, int n) {
  MathKernel<<<1, 256>>>(x, out, n);
  return cudaGetLastError();
}

}  // namespace cuda_emu_test
