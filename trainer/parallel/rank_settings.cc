// ResolveRankSettings: device, precision, backend and compression of one rank, checked once.
#include "trainer/parallel/rank_settings.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "jobspec/plan_vars.h"
#include "jobspec/precision_policy.h"
#include "trainer/parallel/dist_context.h"

namespace ringmaster::trainer {
namespace {

using jobspec::Device;
using jobspec::Precision;

// `s` with the job's file in front, the code kept.
absl::Status InJob(const JobSpec& job, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(job.source, ": ", s.message()));
}

GpuProbe Probe(const RankHost& host) { return host.probe_gpu ? host.probe_gpu() : GpuProbe{}; }

bool Half(Precision p) { return p == Precision::kFp16 || p == Precision::kBf16; }

}  // namespace

absl::StatusOr<RankSettings> ResolveRankSettings(const JobSpec& job, const DistEnv& env,
                                                 const TrainerEnv& trainer_env,
                                                 const RankFlags& flags, const RankHost& host) {
  RankSettings s;
  s.rank_weights = env.rank_weights;
  s.procs_per_node = env.local_world_size;
  s.slowdown = trainer_env.slowdown;
  s.slow_link_gbits = trainer_env.slow_link_gbits;
  s.poison_grad_step = trainer_env.poison_grad_step;
  s.cpu_isa = trainer_env.cpu_isa;

  // The device: --device, else the coordinator's plan for this rank, else train.device, where
  // auto takes a visible GPU.
  Device device = flags.device.value_or(env.device.value_or(job.train.device));
  if (device == Device::kAuto) {
    const DeviceChoice choice = ChooseAutoDevice(Probe(host), env.world_size, host.nccl_built);
    device = choice.device;
    s.notes.push_back(
        absl::StrCat("train.device auto: ", std::string(jobspec::SettingName(choice.device)), " (",
                     choice.reason, ")"));
  }
  s.device = device;
  GpuProbe gpu;
  if (device == Device::kCuda) {
    gpu = Probe(host);
    if (!gpu.engine_linked) {
      return absl::UnimplementedError(
          absl::StrCat(job.source, ": train.device: cuda is not available in this build"));
    }
    // An emulated build runs device cuda only where a test environment asks for it.
    RM_RETURN_IF_ERROR(CheckCudaDevice(gpu, trainer_env.emulated_cuda_ok ? "1" : nullptr));
    s.cuda_device = 0;  // the agent's CUDA_VISIBLE_DEVICES shows the rank its GPU alone
    s.emulated_cuda = gpu.emulated;
    s.gpu_description = absl::StrCat(gpu.name, ", sm_", gpu.compute_capability);
  }

  // The precision: the plan resolves auto per rank (an explicit job precision is what the
  // planner sent through); a plan the rank's device cannot run is refused naming both.
  Precision precision = job.train.precision;
  if (env.precision.has_value()) {
    if (Half(*env.precision) && device == Device::kCpu) {
      return absl::InvalidArgumentError(absl::StrCat(
          jobspec::kPrecisionVar, "=", std::string(jobspec::SettingName(*env.precision)),
          " (the coordinator's plan for this rank) needs a CUDA device, but this rank runs on "
          "the CPU (train.device: cpu); the CPU trainer computes in fp32"));
    }
    if (precision == Precision::kAuto) precision = *env.precision;
  }
  if (device == Device::kCpu) {
    // The CPU trainer computes in fp32: a half-precision request is refused, not silently run
    // in fp32 (whose speed and memory the user did not plan for). auto means fp32 here.
    if (Half(precision)) {
      return absl::InvalidArgumentError(absl::StrCat(
          job.source, ": train.precision: ", std::string(jobspec::SettingName(precision)),
          " needs train.device: cuda; ",
          "the CPU trainer computes in fp32 (use precision auto or fp32)"));
    }
    precision = Precision::kFp32;
  } else if (precision == Precision::kAuto) {
    // No plan: by the device's generation, by the planner's rule.
    precision = jobspec::AutoPrecisionFor(gpu.compute_capability);
    s.notes.push_back(
        absl::StrCat("train.precision auto: ", std::string(jobspec::SettingName(precision)), " (",
                     gpu.name, ", sm_", gpu.compute_capability, ")"));
  }
  s.precision = precision;

  // The wire codec: the plan's replaces the job's (it resolves auto; explicit settings come
  // through unchanged).
  s.compression = env.compression.value_or(job.distributed.compression);

  // The backend this rank can use.
  absl::StatusOr<CommBackend> backend =
      ResolveCommBackend(job.distributed.backend, device == Device::kCuda, host.nccl_built);
  if (!backend.ok()) return InJob(job, backend.status());
  s.backend = *backend;
  // Several CUDA ranks: collectives on device buffers, i.e. NCCL.
  if (device == Device::kCuda && env.world_size > 1 && s.backend != CommBackend::kNccl) {
    return absl::InvalidArgumentError(absl::StrCat(
        job.source,
        ": distributed.backend: gloo cannot carry the CUDA engine's device buffers; use "
        "nccl (or auto) for train.device cuda with several ranks"));
  }
  return s;
}

void ApplyRankSettings(const RankSettings& settings, JobSpec* job) {
  job->train.device = settings.device;
  job->distributed.compression = settings.compression;
}

}  // namespace ringmaster::trainer
