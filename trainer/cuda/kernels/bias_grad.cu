// Column sums in two stages: blocks of (256 columns, 64-row chunk) write one partial per column
// and chunk into scratch, summing their rows in order; then one thread per column sums the
// chunks in order. The split depends only on the shape, so the result is bit-reproducible.
#include "trainer/cuda/kernels/bias_grad.h"
#include "trainer/cuda/kernels/cuda_common.cuh"
#include "trainer/cuda/kernels/kernel_cost.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerChunk = 64;

__global__ void ColumnPartialKernel(const float* dy, float* scratch, int rows, int C) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= C) return;
  const int begin = blockIdx.y * kRowsPerChunk;
  const int end = min(rows, begin + kRowsPerChunk);
  float s = 0.0f;
  for (int r = begin; r < end; ++r) s += dy[static_cast<size_t>(r) * C + j];
  scratch[static_cast<size_t>(blockIdx.y) * C + j] = s;
}

__global__ void ColumnFinalKernel(const float* scratch, float* db, int chunks, int C,
                                  bool accumulate) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= C) return;
  float s = 0.0f;
  for (int c = 0; c < chunks; ++c) s += scratch[static_cast<size_t>(c) * C + j];
  db[j] = accumulate ? db[j] + s : s;
}

}  // namespace

size_t BiasGradientScratchFloats(int rows, int C) {
  return static_cast<size_t>(CeilDiv(rows, kRowsPerChunk)) * C;
}

cudaError_t BiasGradient(const float* dy, float* db, float* scratch, int rows, int C,
                         bool accumulate, cudaStream_t stream) {
  if (rows < 0 || C < 0) return cudaErrorInvalidValue;
  if (C == 0) return cudaSuccess;
  const int chunks = CeilDiv(rows, kRowsPerChunk);
  const int col_blocks = CeilDiv(C, kThreads);
  if (chunks > 0) {
    DeclareKernelCost({4.0 * rows * C, 4.0 * chunks * C, 1.0 * rows * C});
    ColumnPartialKernel<<<dim3(col_blocks, chunks), kThreads, 0, stream>>>(dy, scratch, rows, C);
  }
  DeclareKernelCost({4.0 * chunks * C + (accumulate ? 4.0 * C : 0.0), 4.0 * C, 1.0 * chunks * C});
  ColumnFinalKernel<<<col_blocks, kThreads, 0, stream>>>(scratch, db, chunks, C, accumulate);
  return cudaGetLastError();
}

}  // namespace ringmaster::trainer::cuda
