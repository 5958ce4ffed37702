// Layout and element-wise kernels around attention: grid-stride loops over the output elements,
// one thread per element, consecutive threads on consecutive d (coalesced on both sides when
// D >= 32).
#include "trainer/cuda/kernels/attention_ops.h"
#include "trainer/cuda/kernels/counter_rng.cuh"
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(size_t n) {
  const size_t b = CeilDiv<size_t>(n, kThreads);
  return static_cast<int>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

#define RM_GRID_STRIDE(i, n)                                                           \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

__global__ void RowsToHeadsKernel(const float* rows, int64_t ld, float* heads, int S, int NH, int D,
                                  size_t n) {
  RM_GRID_STRIDE(i, n) {
    const int d = static_cast<int>(i % D);
    const int s = static_cast<int>((i / D) % S);
    const size_t bh = i / (static_cast<size_t>(D) * S);
    const int h = static_cast<int>(bh % NH);
    const size_t b = bh / NH;
    heads[i] = rows[(b * S + s) * ld + static_cast<size_t>(h) * D + d];
  }
}

__global__ void HeadsToRowsKernel(const float* heads, float* rows, int64_t ld, int S, int NH, int D,
                                  size_t n) {
  RM_GRID_STRIDE(i, n) {
    const int d = static_cast<int>(i % D);
    const int s = static_cast<int>((i / D) % S);
    const size_t bh = i / (static_cast<size_t>(D) * S);
    const int h = static_cast<int>(bh % NH);
    const size_t b = bh / NH;
    rows[(b * S + s) * ld + static_cast<size_t>(h) * D + d] = heads[i];
  }
}

__global__ void AttentionDropoutKernel(const float* probs, float* mask, float* dropped,
                                       size_t block, float p, float keep_scale, uint64_t seed,
                                       size_t n) {
  RM_GRID_STRIDE(i, n) {
    const uint64_t bh = i / block;
    const float m = UniformAt(Mix64(seed ^ bh), i % block) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    dropped[i] = probs[i] * m;
  }
}

__global__ void TanhForwardKernel(const float* x, float* y, size_t n) {
  RM_GRID_STRIDE(i, n) { y[i] = tanhf(x[i]); }
}

__global__ void TanhBackwardKernel(const float* dy, const float* y, float* dx, size_t n) {
  RM_GRID_STRIDE(i, n) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); }
}

__global__ void MultiplyKernel(const float* a, const float* b, float* out, size_t n) {
  RM_GRID_STRIDE(i, n) { out[i] = a[i] * b[i]; }
}

__global__ void AddInPlaceKernel(float* y, const float* r, size_t n) {
  RM_GRID_STRIDE(i, n) { y[i] += r[i]; }
}

#undef RM_GRID_STRIDE

// Checks a rows <-> heads shape (non-negative, rows wide enough for NH heads of D) and gives the
// element count.
bool HeadsShape(int64_t ld, int B, int S, int NH, int D, size_t* n) {
  if (B < 0 || S < 0 || NH < 0 || D < 0 || ld < static_cast<int64_t>(NH) * D) return false;
  *n = static_cast<size_t>(B) * NH * S * D;
  return true;
}

}  // namespace

cudaError_t RowsToHeads(const float* rows, int64_t ld, float* heads, int B, int S, int NH, int D,
                        cudaStream_t stream) {
  size_t n = 0;
  if (!HeadsShape(ld, B, S, NH, D, &n)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 1, 1, 0));  // the head columns of rows (ld may be wider)
  RowsToHeadsKernel<<<Blocks(n), kThreads, 0, stream>>>(rows, ld, heads, S, NH, D, n);
  return cudaGetLastError();
}

cudaError_t HeadsToRows(const float* heads, float* rows, int64_t ld, int B, int S, int NH, int D,
                        cudaStream_t stream) {
  size_t n = 0;
  if (!HeadsShape(ld, B, S, NH, D, &n)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 1, 1, 0));
  HeadsToRowsKernel<<<Blocks(n), kThreads, 0, stream>>>(heads, rows, ld, S, NH, D, n);
  return cudaGetLastError();
}

cudaError_t AttentionDropoutForward(const float* probs, float* mask, float* dropped, int BH, int S,
                                    float p, uint64_t seed, cudaStream_t stream) {
  const size_t block = static_cast<size_t>(S) * S, n = block * BH;
  if (n == 0) return cudaSuccess;
  if (p <= 0.0f) {
    return cudaMemcpyAsync(dropped, probs, n * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  }
  if (p >= 1.0f) return cudaErrorInvalidValue;
  const float keep_scale = 1.0f / (1.0f - p);       // as the CPU: T(1) / (T(1) - T(p))
  DeclareKernelCost(ElementwiseCost(n, 1, 2, 12));  // probs in; mask and dropped out
  AttentionDropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(probs, mask, dropped, block, p,
                                                             keep_scale, seed, n);
  return cudaGetLastError();
}

cudaError_t TanhForward(const float* x, float* y, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 1, 1, 8));
  TanhForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t TanhBackward(const float* dy, const float* y, float* dx, size_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 2, 1, 3));
  TanhBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t Multiply(const float* a, const float* b, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 2, 1, 1));
  MultiplyKernel<<<Blocks(n), kThreads, 0, stream>>>(a, b, out, n);
  return cudaGetLastError();
}

cudaError_t AddInPlace(float* y, const float* r, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DeclareKernelCost(ElementwiseCost(n, 2, 1, 1));
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, stream>>>(y, r, n);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
