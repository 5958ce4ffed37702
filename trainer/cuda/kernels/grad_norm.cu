// Global gradient L2 norm and clipping, as GradNorm/ClipGradNorm (trainer/optim/adamw.cc).
// Sum of squares in double by a deterministic two-stage reduction: a fixed grid (a function of
// n only) of grid-stride partial sums, each block reduced by a fixed tree into scratch, then one
// block summing the partials by the same tree. The clip reads the norm on the device, so no
// host synchronisation is needed.
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"
#include "trainer/cuda/kernels/kernels.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

int NormBlocks(size_t n) {
  const size_t b = (n + 4 * kThreads - 1) / (4 * kThreads);
  return static_cast<int>(b < kMaxBlocks ? (b == 0 ? 1 : b) : kMaxBlocks);
}

// Tree sum of kThreads doubles in shared memory; the result is in s[0].
__device__ void BlockTreeSum(double* s) {
  for (int o = kThreads / 2; o > 0; o >>= 1) {
    __syncthreads();
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
  }
  __syncthreads();
}

__global__ void SumSquaresPartialKernel(const float* g, size_t n, double* partials) {
  __shared__ double s[kThreads];
  double acc = 0.0;
  for (size_t i = blockIdx.x * static_cast<size_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * kThreads) {
    const double v = g[i];
    acc += v * v;
  }
  s[threadIdx.x] = acc;
  BlockTreeSum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

__global__ void NormFinalKernel(const double* partials, int count, bool take_sqrt, double* norm) {
  __shared__ double s[kThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  s[threadIdx.x] = acc;
  BlockTreeSum(s);
  if (threadIdx.x == 0) *norm = take_sqrt ? sqrt(s[0]) : s[0];
}

__global__ void ClipKernel(float* g, size_t n, const double* norm, double max_norm) {
  const double coef = max_norm / (*norm + 1e-6);
  if (!(coef < 1.0)) return;
  const float c = static_cast<float>(coef);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    g[i] *= c;
  }
}

cudaError_t SumSquares(const float* grads, size_t n, double* scratch, bool take_sqrt, double* out,
                       cudaStream_t stream) {
  if (scratch == nullptr || out == nullptr) return cudaErrorInvalidValue;
  const int blocks = NormBlocks(n);
  DeclareKernelCost({4.0 * n, 8.0 * blocks, 2.0 * n});
  SumSquaresPartialKernel<<<blocks, kThreads, 0, stream>>>(grads, n, scratch);
  DeclareKernelCost({8.0 * blocks, 8.0, 1.0 * blocks});
  NormFinalKernel<<<1, kThreads, 0, stream>>>(scratch, blocks, take_sqrt, out);
  return cudaGetLastError();
}

}  // namespace

size_t GradNormScratchDoubles(size_t n) { return static_cast<size_t>(NormBlocks(n)); }

cudaError_t GradNorm(const float* grads, size_t n, double* scratch, double* norm,
                     cudaStream_t stream) {
  return SumSquares(grads, n, scratch, /*take_sqrt=*/true, norm, stream);
}

cudaError_t GradSumSquares(const float* grads, size_t n, double* scratch, double* sum,
                           cudaStream_t stream) {
  return SumSquares(grads, n, scratch, /*take_sqrt=*/false, sum, stream);
}

cudaError_t ClipGradNorm(float* grads, size_t n, double max_norm, double* scratch, double* norm,
                         cudaStream_t stream) {
  const cudaError_t e = GradNorm(grads, n, scratch, norm, stream);
  if (e != cudaSuccess || max_norm <= 0 || n == 0) return e;
  const size_t b = (n + 255) / 256;
  DeclareKernelCost({4.0 * n + 8.0, 4.0 * n, 1.0 * n});  // every thread reads *norm
  ClipKernel<<<static_cast<int>(b < 65535 ? b : 65535), 256, 0, stream>>>(grads, n, norm, max_norm);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
