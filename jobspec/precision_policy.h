// Which precision a GPU computes in when the job says `train.precision: auto`, and what each
// precision needs: one rule for the coordinator's planner (per rank, from the agents' GPU
// inventory) and for a trainer started without a plan (from the CUDA runtime).
#pragma once

#include "jobspec/job_settings.h"

namespace ringmaster::jobspec {

// compute capability as major*10+minor (sm_90 = 90).
//  >= 80 (A100, H100/H200): bf16, no loss scaling needed;
//  >= 70 (V100, T4): fp16 with dynamic loss scaling (tensor cores, no bf16);
//  below (P40, sm_61): fp32, no tensor cores.
inline Precision AutoPrecisionFor(int compute_capability) {
  if (compute_capability >= 80) return Precision::kBf16;
  if (compute_capability >= 70) return Precision::kFp16;
  return Precision::kFp32;
}

// The least compute capability that runs `p` on the CUDA engine (0: any).
inline int MinComputeCapabilityFor(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return 80;
    case Precision::kFp16:
      return 70;
    default:
      return 0;
  }
}

}  // namespace ringmaster::jobspec
