// Bias gradient of a Linear layer: db (C) (+)= Σ over rows of dy (rows, C), deterministic (a
// fixed two-stage reduction, no atomics), so a GPU step gives the same bits run after run.
// CPU reference: cpu::LinearBackward's db.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ringmaster::trainer::cuda {

// Floats of scratch BiasGradient needs for (rows, C).
size_t BiasGradientScratchFloats(int rows, int C);
// db = (accumulate ? db : 0) + Σ_r dy[r, :]; scratch holds BiasGradientScratchFloats(rows, C).
cudaError_t BiasGradient(const float* dy, float* db, float* scratch, int rows, int C,
                         bool accumulate, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
