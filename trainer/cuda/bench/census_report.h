// The step census's report (issue #28, docs/performance-gpu.md "The step census"): one training
// step's counts from the emulator (emu/census.h) turned into totals, a roofline prediction per
// GPU, a JSON document (the input of the GPU check's measured-against-predicted report) and a
// check against a baseline of upper bounds. Emulated builds only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cuda_emu/census.h"

namespace ringmaster::trainer::cuda {

// One GPU of the roofline: GEMM ceilings by operand type and the copy bandwidth.
struct RooflineDevice {
  std::string name;
  std::string precision;    // the step's precision on this GPU: "bf16" or "fp32"
  double gemm_16bit_flops;  // FLOP/s of bf16/fp16 GEMMs (0: none)
  double gemm_fp32_flops;   // FLOP/s of fp32 GEMMs (no TF32)
  double bytes_per_second;  // device copy bandwidth
  std::string source;       // where the figures come from
};
// H200 (measured here), A100-80GB (vendor), P40 (vendor): ../shared/REFERENCE.md.
std::vector<RooflineDevice> DefaultDevices();

struct RooflineAssumptions {
  double launch_seconds = 3e-6;  // each kernel launch, GEMM, memset or copy (no graphs)
  double sync_seconds = 10e-6;   // each blocking host sync (the queue drains, the host waits)
};

// One step's census, summarised.
struct StepSummary {
  std::string precision;
  cuda_emu::Census census;  // the step (after a warm-up step)
  cuda_emu::Census first;   // the first step (allocations of the arena and workspaces)
  double arena_bytes = 0;
  double gemm_flops = 0, gemm_16bit_flops = 0, gemm_fp32_flops = 0;
  int64_t gemm_calls = 0;
  int64_t kernel_launches = 0;  // kernels (not GEMMs)
  int64_t undeclared_launches = 0;
  double kernel_bytes = 0;    // declared bytes read + written by the kernels
  double non_gemm_bytes = 0;  // kernel_bytes + memsets + device-to-device copies (r + w)
  int64_t operations = 0;     // kernel launches + GEMMs + memsets + copies
  int64_t blocking_syncs = 0;
  int64_t allocations = 0;  // device cudaMalloc + cudaFree in the step
  bool clip_applied = false;
};
StepSummary Summarise(const std::string& precision, const cuda_emu::Census& first,
                      const cuda_emu::Census& step, double arena_bytes, bool clip_applied);

struct Prediction {
  double gemm_seconds = 0, memory_seconds = 0, overhead_seconds = 0, step_seconds = 0;
  // Non-GEMM kernels above the fp32 ridge (the fused attention's FMA loops on CUDA cores): per
  // kernel name, the time its declared FLOPs take at the fp32 ceiling beyond its bytes' time.
  double kernel_compute_seconds = 0;
  double mfu = 0;                 // model FLOPs / (step time · the GEMM ceiling of its precision)
  double outside_gemm_share = 0;  // (memory + kernel compute + overhead) / step
};
Prediction Predict(const StepSummary& s, const RooflineDevice& d, const RooflineAssumptions& a,
                   double model_flops);

struct CensusShape {
  int batch = 32, seq = 128, layers = 12, hidden = 768, intermediate = 3072, heads = 12;
  int vocab = 30522;
  double params = 0, non_embedding_params = 0;
  bool dry = true;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};
// 6 · non-embedding params · tokens + attention's 12 · L · S² · H · B (forward + backward).
double ModelFlops(const CensusShape& shape);

// The report: text for people, JSON for tools.
std::string TextReport(const CensusShape& shape, const std::vector<StepSummary>& steps,
                       const RooflineAssumptions& a);
std::string JsonReport(const CensusShape& shape, const std::vector<StepSummary>& steps,
                       const RooflineAssumptions& a);

// The baseline file: one line per bound, "<precision> <figure> <max>" (# comments), figures
// launches, blocking_syncs, non_gemm_bytes, arena_bytes, allocations, gemm_flops. Every figure
// above its bound is named in the error (the step gave speed back).
absl::Status CheckBaseline(const std::string& path, const std::vector<StepSummary>& steps);

}  // namespace ringmaster::trainer::cuda
