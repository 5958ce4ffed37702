// PowerSGD's products on the device (powersgd.cu), for DevicePowerSgd (device_powersgd.h).
// Row-major matrices: M and G rows x cols, P rows x r, Q and Q' cols x r. Launchers enqueue on
// `stream` and return the launch's cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ringmaster::trainer::cuda {

// m = g + e (n floats).
cudaError_t PowerSgdFormM(const float* g, const float* e, float* m, size_t n, cudaStream_t stream);
// p = m q.
cudaError_t PowerSgdMQ(const float* m, const float* q, float* p, int rows, int cols, int r,
                       cudaStream_t stream);
// qn = mᵀ p.
cudaError_t PowerSgdMtP(const float* m, const float* p, float* qn, int rows, int cols, int r,
                        cudaStream_t stream);
// g = p qnᵀ; e = m − g · inv_world, 0 where that is not finite.
cudaError_t PowerSgdCommit(const float* p, const float* qn, const float* m, float* g, float* e,
                           int rows, int cols, int r, float inv_world, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
