// One rank's settings, resolved in one place: the job (YAML), the coordinator's plan for this rank
// (DistEnv: RINGMASTER_DEVICE, RINGMASTER_PRECISION, RINGMASTER_COMPRESSION,
// RINGMASTER_RANK_WEIGHTS), the trainer's own environment (TrainerEnv), the command line (--device)
// and what this binary and machine offer (the GPU probe, NCCL). Both engines' option builders read
// the result (CpuEngineOptionsFor, trainer/train/cpu_engine.h; the CUDA engine's factory,
// trainer/cuda/engine/cuda_engine_factory.h); `ringmaster-trainer train` only wires.
//
// Precedence, per setting:
//   device       --device > the plan (RINGMASTER_DEVICE) > train.device; auto takes a visible
//                GPU (ChooseAutoDevice, device_choice.h).
//   precision    the plan (RINGMASTER_PRECISION) resolves train.precision: auto; an explicit
//                train.precision stands. auto without a plan: fp32 on the CPU, by the GPU's
//                generation on CUDA (jobspec/precision_policy.h, the planner's rule).
//   compression  the plan's wire codec (RINGMASTER_COMPRESSION) > distributed.compression.
//   backend      distributed.backend resolved for this rank's device (ResolveCommBackend).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"
#include "jobspec/job_spec.h"
#include "trainer/parallel/device_choice.h"
#include "trainer/parallel/dist_env.h"

namespace ringmaster::trainer {

// What the command line says about the rank (nullopt: not given).
struct RankFlags {
  std::optional<jobspec::Device> device;  // --device
};

// What this binary and machine offer.
struct RankHost {
  // What the CUDA runtime shows this process; called only when a device or precision is to be
  // decided or checked (device auto or cuda). Null: no CUDA engine in this build.
  std::function<GpuProbe()> probe_gpu;
  bool nccl_built = false;  // the binary has NCCL for the CUDA engine's collectives
};

struct RankSettings {
  jobspec::Device device = jobspec::Device::kCpu;  // kCpu or kCuda, never kAuto
  // The CUDA device this rank computes on: 0 on a CUDA rank (its agent's CUDA_VISIBLE_DEVICES
  // shows it its planned GPU alone), -1 on a CPU rank.
  int cuda_device = -1;
  // Compute precision, never kAuto: kFp32 on the CPU; kFp32, kBf16 or kFp16 (GEMM-level mixed
  // precision, fp32 master weights) on CUDA.
  jobspec::Precision precision = jobspec::Precision::kFp32;
  // kGloo or kNccl, never kAuto: how this rank's collectives travel.
  jobspec::Backend backend = jobspec::Backend::kGloo;
  // The wire codec: the plan's, else the job's. kAuto: the CPU engine measures its links
  // (ResolveAutoCompression); uncompressed on CUDA ranks.
  jobspec::Compression compression = jobspec::Compression::kAuto;
  // Each rank's share of a global batch (RINGMASTER_RANK_WEIGHTS); empty: equal shares.
  std::vector<double> rank_weights;
  int procs_per_node = 1;  // ranks on this node, as planned (LOCAL_WORLD_SIZE)
  // The trainer's own tuning (TrainerEnv) that the engines apply.
  double slowdown = 1.0;         // RINGMASTER_SLOWDOWN
  double slow_link_gbits = 5.0;  // RINGMASTER_SLOW_LINK_GBITS: compression auto's threshold
  int64_t poison_grad_step = 0;  // RINGMASTER_TEST_POISON_GRAD_STEP; 0: never
  std::string cpu_isa;           // RINGMASTER_CPU_ISA; empty: the best this CPU runs
  bool emulated_cuda = false;    // the CUDA device is the emulator's (a test build)
  std::string gpu_description;   // what the probe saw, for the engine's log line
  // How each `auto` was decided, one log line each ("train.device auto: cuda (...)").
  std::vector<std::string> notes;
};

// Resolves the rank's settings. Every error is the job's (a restart cannot fix it; exit 3),
// prefixed with job.source where it names a job setting:
//  - train.device: cuda without the CUDA engine in this build (Unimplemented);
//  - on the CUDA emulator without RINGMASTER_EMULATED_CUDA_OK=1 (FailedPrecondition,
//    CheckCudaDevice);
//  - a plan this rank's hardware cannot run, e.g. RINGMASTER_PRECISION=bf16 for a CPU rank
//    (InvalidArgument naming the variable and the device);
//  - half precision in the job for a CPU rank; a backend the rank cannot use; gloo for a CUDA
//    rank of several (InvalidArgument).
absl::StatusOr<RankSettings> ResolveRankSettings(const JobSpec& job, const DistEnv& env,
                                                 const TrainerEnv& trainer_env,
                                                 const RankFlags& flags, const RankHost& host);

// Writes the resolved device and wire codec into `job` (what the training loop reports and
// compares on resume), as the plan intends.
void ApplyRankSettings(const RankSettings& settings, JobSpec* job);

}  // namespace ringmaster::trainer
