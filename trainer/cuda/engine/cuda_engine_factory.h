// The CUDA engine as the trainer builds it for a rank: its options from the job and the rank's
// resolved settings (trainer/parallel/rank_settings.h), the engine over them. The CPU engine's
// counterpart is CpuEngineOptionsFor (trainer/train/cpu_engine.h).
#pragma once

#include <cstdint>
#include <string>

#include "jobspec/job_spec.h"
#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/parallel/rank_settings.h"
#include "trainer/train/trainer.h"

namespace ringmaster::trainer::cuda {

// The engine's options for this rank of `world_size`, in a run of `total_steps` with
// `warmup_steps` of LR warmup (PowerSGD's default start).
CudaTrainerOptions CudaEngineOptionsFor(const JobSpec& job, const RankSettings& settings,
                                        int world_size, int64_t total_steps, int64_t warmup_steps);

// What ringmaster-trainer passes to Trainer::Create: builds a CudaEngine with
// CudaEngineOptionsFor on the rank's communicators, and logs what it runs on (with
// `cuda_visible_devices`, TrainerEnv's CUDA_VISIBLE_DEVICES).
CudaEngineFactory MakeCudaEngineFactory(const std::string& cuda_visible_devices);

}  // namespace ringmaster::trainer::cuda
