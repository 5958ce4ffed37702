// CUDA kernels of the BERT layers; each has its CPU reference in trainer/model/cpu_ops.h and a
// test against it (label `gpu`). Launchers take a stream, check their shape assumptions and
// return the launch's cudaError_t. The CUDA trainer (issue #3) builds on these.
//
// Letters: N rows, H hidden.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ringmaster::trainer::cuda {

// y = GELU(x), exact erf form.
cudaError_t GeluForward(const float* x, float* y, size_t n, cudaStream_t stream);
// dx = dy · GELU'(x).
cudaError_t GeluBackward(const float* dy, const float* x, float* dx, size_t n, cudaStream_t stream);
// LayerNorm over rows of H, one warp per row; saves mean and rstd (N each).
cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                             float* mean, float* rstd, int N, int H, float eps,
                             cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
