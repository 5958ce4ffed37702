// PowerSGD's products on the device (device_powersgd.h): M = G + E, P = M Q, Q' = Mᵀ P and the
// commit G = P Q'ᵀ, E = M − G / world. Row-major, r small (the factors' rank). Each output
// element is one deterministic sum in fp32 (a warp's fixed tree for P, a sequential loop for Q'
// and G), so a run repeats its bits. The CPU reference is trainer/parallel/powersgd.cc's BLAS calls
// (powersgd_gpu_test checks the whole step against it).
#include <algorithm>

#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/powersgd_kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  const size_t b = CeilDiv<size_t>(n, kThreads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

__global__ void FormMKernel(const float* g, const float* e, float* m, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    m[i] = g[i] + e[i];
  }
}

// One warp per row i of M: p[i·r + j] = Σ_k m[i·cols + k] · q[k·r + j], lanes striding k, then
// the warp's butterfly sum.
__global__ void MQKernel(const float* m, const float* q, float* p, int rows, int cols, int r) {
  const int warps = blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int i = blockIdx.x * warps + threadIdx.x / 32; i < rows; i += gridDim.x * warps) {
    const float* row = m + static_cast<size_t>(i) * cols;
    for (int j = 0; j < r; ++j) {
      float acc = 0.0f;
      for (int k = lane; k < cols; k += 32) acc += row[k] * q[static_cast<size_t>(k) * r + j];
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) p[static_cast<size_t>(i) * r + j] = acc;
    }
  }
}

// One thread per column k of M: qn[k·r + j] = Σ_i m[i·cols + k] · p[i·r + j], i in order.
__global__ void MtPKernel(const float* m, const float* p, float* qn, int rows, int cols, int r) {
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < cols; k += gridDim.x * blockDim.x) {
    for (int j = 0; j < r; ++j) {
      float acc = 0.0f;
      for (int i = 0; i < rows; ++i) {
        acc += m[static_cast<size_t>(i) * cols + k] * p[static_cast<size_t>(i) * r + j];
      }
      qn[static_cast<size_t>(k) * r + j] = acc;
    }
  }
}

// g = P Q'ᵀ element by element; e = M − g / world (0 where that is not finite).
__global__ void CommitKernel(const float* p, const float* qn, const float* m, float* g, float* e,
                             int rows, int cols, int r, float inv_world) {
  const size_t n = static_cast<size_t>(rows) * cols;
  for (size_t x = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = x / cols, k = x % cols;
    float acc = 0.0f;
    for (int j = 0; j < r; ++j) acc += p[i * r + j] * qn[k * r + j];
    g[x] = acc;
    const float res = m[x] - acc * inv_world;
    e[x] = res - res == 0.0f ? res : 0.0f;  // 0 for inf and NaN (their difference is NaN)
  }
}

}  // namespace

cudaError_t PowerSgdFormM(const float* g, const float* e, float* m, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FormMKernel<<<Blocks(n), kThreads, 0, stream>>>(g, e, m, n);
  return cudaGetLastError();
}

cudaError_t PowerSgdMQ(const float* m, const float* q, float* p, int rows, int cols, int r,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || r <= 0) return cudaErrorInvalidValue;
  const int warps = kThreads / 32;
  const int blocks = std::min(CeilDiv(rows, warps), 65535);
  MQKernel<<<blocks, kThreads, 0, stream>>>(m, q, p, rows, cols, r);
  return cudaGetLastError();
}

cudaError_t PowerSgdMtP(const float* m, const float* p, float* qn, int rows, int cols, int r,
                        cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || r <= 0) return cudaErrorInvalidValue;
  MtPKernel<<<Blocks(static_cast<size_t>(cols)), kThreads, 0, stream>>>(m, p, qn, rows, cols, r);
  return cudaGetLastError();
}

cudaError_t PowerSgdCommit(const float* p, const float* qn, const float* m, float* g, float* e,
                           int rows, int cols, int r, float inv_world, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || r <= 0) return cudaErrorInvalidValue;
  CommitKernel<<<Blocks(static_cast<size_t>(rows) * cols), kThreads, 0, stream>>>(
      p, qn, m, g, e, rows, cols, r, inv_world);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
