// What the CUDA runtime shows this process, for `train.device: auto` (device_choice.h).
#pragma once

#include "trainer/parallel/device_choice.h"

namespace ringmaster::trainer::cuda {

// Never fails: a runtime error (no driver, no device) is reported in GpuProbe::error.
GpuProbe ProbeGpu();

}  // namespace ringmaster::trainer::cuda
