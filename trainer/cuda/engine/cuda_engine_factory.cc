// CudaEngineOptionsFor and the factory ringmaster-trainer hands to Trainer::Create.
#include "trainer/cuda/engine/cuda_engine_factory.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "trainer/cuda/engine/cuda_engine.h"
#include "trainer/cuda/engine/gpu_probe.h"
#include "trainer/parallel/data_parallel.h"

namespace ringmaster::trainer::cuda {

CudaTrainerOptions CudaEngineOptionsFor(const JobSpec& job, const RankSettings& settings,
                                        int world_size, int64_t total_steps, int64_t warmup_steps) {
  CudaTrainerOptions options;
  options.sharding = job.distributed.sharding;
  options.bucket_cap_bytes = BucketCapBytes(job.distributed.bucket_cap_mb);
  if (world_size > 1) {
    // fp16/bf16/int8/powersgd as on the CPU engine; auto stays uncompressed on CUDA ranks.
    DataParallelOptions dp;
    SetCompression(settings.compression, job.distributed.powersgd_rank, &dp);
    options.compression.codec = dp.codec;
    options.compression.powersgd = dp.powersgd;
    options.compression.powersgd_rank = dp.powersgd_rank;
    options.compression.seed = job.train.seed;
    options.compression.skip_zero_blocks = job.distributed.skip_zero_blocks;
    // As the CPU engine: exact all-reduces through the LR warmup and the first tenth.
    options.compression.powersgd_start_step =
        job.distributed.powersgd_start_step >= 0
            ? job.distributed.powersgd_start_step
            : std::max<int64_t>(warmup_steps, total_steps / 10);
  }
  options.adam = AdamWOptions{job.train.adam_beta1, job.train.adam_beta2, job.train.adam_eps,
                              job.train.weight_decay};
  options.gradient_checkpointing = job.train.gradient_checkpointing;
  // bf16/fp16 are GEMM-level mixed precision (fp32 master weights).
  if (settings.precision == jobspec::Precision::kBf16) {
    options.precision = GemmPrecision::kBf16;
  } else if (settings.precision == jobspec::Precision::kFp16) {
    options.precision = GemmPrecision::kFp16;
  }
  // Test hook of the fp16 tests (tests/trainer_cuda_engine.sh): poison one step's gradient.
  options.poison_grad_at_call = settings.poison_grad_step;
  return options;
}

CudaEngineFactory MakeCudaEngineFactory(const std::string& cuda_visible_devices) {
  return
      [cuda_visible_devices](const JobSpec& job, const RankSettings& settings,
                             const BertConfig& config, const ParamLayout& layout,
                             const float* initial, DistContext& dist, int64_t total_steps,
                             int64_t warmup_steps) -> absl::StatusOr<std::unique_ptr<StepEngine>> {
        const CudaTrainerOptions options =
            CudaEngineOptionsFor(job, settings, dist.world_size(), total_steps, warmup_steps);
        // Several CUDA ranks: collectives on device buffers over NCCL (ResolveRankSettings checked
        // the backend).
        DataParallelComms comms;
        if (dist.world_size() > 1)
          comms = DataParallelComms{dist.world(), dist.intra(), dist.inter()};
        absl::StatusOr<std::unique_ptr<CudaEngine>> engine =
            CudaEngine::Create(options, config, layout, initial, comms);
        if (!engine.ok()) {
          return absl::Status(engine.status().code(),
                              absl::StrCat(job.source, ": ", engine.status().message()));
        }
        // A run on the emulator (a test build that was let run it) says so every time.
        if (const std::string w = EmulatedCudaWarning(ProbeGpu()); !w.empty()) LogWarning(w);
        LogInfo(absl::StrCat("train.device: cuda: the CUDA engine (",
                             GemmPrecisionName(options.precision), ") on ", DeviceDescription(),
                             " (CUDA_VISIBLE_DEVICES=", cuda_visible_devices, ")"));
        return std::unique_ptr<StepEngine>(*std::move(engine));
      };
}

}  // namespace ringmaster::trainer::cuda
