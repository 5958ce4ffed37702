#include "trainer/cuda/bench/census_report.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster::trainer::cuda {
namespace {

bool Is16Bit(const std::string& gemm_key) {
  // "api A/B/C/D": the A operand's type decides the ceiling.
  const size_t space = gemm_key.rfind(' ');
  const std::string a = gemm_key.substr(space + 1, gemm_key.find('/', space) - space - 1);
  return a == "bf16" || a == "f16";
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Num(double v) { return absl::StrFormat("%.17g", v); }

const char* kTargets =
    "targets (issue #28, not asserted yet): outside-GEMM bytes <= 9 GB, 0 blocking syncs, "
    "0 allocations, <= 200 launches (one graph launch), arena <= 1.5 GB, H200 MFU >= 55%, "
    "P40 outside-GEMM time <= 25% of GEMM time";

}  // namespace

std::vector<RooflineDevice> DefaultDevices() {
  return {
      {"H200", "bf16", 790e12, 67e12, 4.3e12,
       "790 TFLOP/s bf16 (8192^3 GEMM) and 4.3 TB/s device copy measured on the lent H200; "
       "fp32 67 TFLOP/s vendor"},
      {"A100", "bf16", 312e12, 19.5e12, 2.0e12,
       "A100-80GB vendor: 312 TFLOP/s dense bf16, 19.5 TFLOP/s fp32, ~2.0 TB/s HBM"},
      {"P40", "fp32", 0, 11.8e12, 346e9,
       "Tesla P40 vendor: 11.8 TFLOP/s fp32, 346 GB/s, no bf16, no tensor cores"},
  };
}

StepSummary Summarise(const std::string& precision, const cuda_emu::Census& first,
                      const cuda_emu::Census& step, double arena_bytes, bool clip_applied) {
  StepSummary s;
  s.precision = precision;
  s.first = first;
  s.census = step;
  s.arena_bytes = arena_bytes;
  s.clip_applied = clip_applied;
  for (const auto& [key, g] : step.gemms) {
    s.gemm_calls += g.calls;
    s.gemm_flops += g.flops;
    (Is16Bit(key) ? s.gemm_16bit_flops : s.gemm_fp32_flops) += g.flops;
  }
  for (const auto& [name, k] : step.kernels) {
    s.kernel_launches += k.launches;
    s.undeclared_launches += k.launches - k.declared;
    s.kernel_bytes += k.bytes_read + k.bytes_written;
  }
  s.non_gemm_bytes = s.kernel_bytes + step.memset_bytes + 2 * step.d2d_copy_bytes;
  s.operations = s.kernel_launches + s.gemm_calls + step.memsets + step.sync_copies +
                 step.pageable_async_d2h + step.pageable_async_h2d + step.async_copies;
  s.blocking_syncs = step.BlockingSyncs();
  s.allocations = step.mallocs + step.frees;
  return s;
}

double ModelFlops(const CensusShape& c) {
  const double tokens = static_cast<double>(c.batch) * c.seq;
  return 6.0 * c.non_embedding_params * tokens +
         12.0 * c.layers * static_cast<double>(c.seq) * c.seq * c.hidden * c.batch;
}

Prediction Predict(const StepSummary& s, const RooflineDevice& d, const RooflineAssumptions& a,
                   double model_flops) {
  Prediction p;
  const double fp16_peak = d.gemm_16bit_flops > 0 ? d.gemm_16bit_flops : d.gemm_fp32_flops;
  p.gemm_seconds = s.gemm_16bit_flops / fp16_peak + s.gemm_fp32_flops / d.gemm_fp32_flops;
  p.memory_seconds = s.non_gemm_bytes / d.bytes_per_second;
  for (const auto& [name, k] : s.census.kernels) {
    const double compute = k.flops / d.gemm_fp32_flops;
    const double memory = (k.bytes_read + k.bytes_written) / d.bytes_per_second;
    if (compute > memory) p.kernel_compute_seconds += compute - memory;
  }
  p.overhead_seconds = s.operations * a.launch_seconds + s.blocking_syncs * a.sync_seconds;
  p.step_seconds =
      p.gemm_seconds + p.memory_seconds + p.kernel_compute_seconds + p.overhead_seconds;
  const double peak = d.precision == "fp32" ? d.gemm_fp32_flops : fp16_peak;
  p.mfu = model_flops / (p.step_seconds * peak);
  p.outside_gemm_share = (p.step_seconds - p.gemm_seconds) / p.step_seconds;
  return p;
}

std::string TextReport(const CensusShape& c, const std::vector<StepSummary>& steps,
                       const RooflineAssumptions& a) {
  std::ostringstream o;
  const double model_flops = ModelFlops(c);
  o << absl::StrFormat(
      "step census: BERT B=%d S=%d L=%d H=%d I=%d heads=%d vocab=%d, one training step "
      "(forward, loss, backward, grad norm, clipping, AdamW) after a warm-up step; %s\n",
      c.batch, c.seq, c.layers, c.hidden, c.intermediate, c.heads, c.vocab,
      c.dry ? "dry run (kernels and GEMMs counted, not executed: CUDA_EMU_CENSUS=dry)"
            : "executed");
  o << absl::StrFormat(
      "params %.0f (non-embedding %.0f); model FLOPs %.4g = 6 x non-embedding params x tokens + "
      "12 x L x S^2 x H x B (attention)\n",
      c.params, c.non_embedding_params, model_flops);
  for (const StepSummary& s : steps) {
    const cuda_emu::Census& k = s.census;
    o << "\n== precision " << s.precision << "\n";
    o << absl::StrFormat("%-44s %8s %12s %12s\n", "kernel", "launches", "read GB", "written GB");
    for (const auto& [name, n] : k.kernels) {
      o << absl::StrFormat("%-44s %8d %12.4f %12.4f%s\n", name, n.launches, n.bytes_read / 1e9,
                           n.bytes_written / 1e9,
                           n.declared < n.launches ? "  (bytes not declared)" : "");
    }
    for (const auto& [key, g] : k.gemms) {
      o << absl::StrFormat("%-44s %8d %12.4g FLOP\n", key, g.calls, g.flops);
    }
    o << absl::StrFormat(
        "kernel launches %d (undeclared %d), GEMM calls %d, memsets %d, copies %d (sync %d, "
        "async pageable d2h %d, pageable h2d %d, other %d)\n",
        s.kernel_launches, s.undeclared_launches, s.gemm_calls, k.memsets,
        k.sync_copies + k.pageable_async_d2h + k.pageable_async_h2d + k.async_copies, k.sync_copies,
        k.pageable_async_d2h, k.pageable_async_h2d, k.async_copies);
    o << absl::StrFormat(
        "blocking host syncs %d (stream %d, device %d, event %d, sync copies %d, pageable async "
        "d2h %d)\n",
        s.blocking_syncs, k.stream_syncs, k.device_syncs, k.event_syncs, k.sync_copies,
        k.pageable_async_d2h);
    o << absl::StrFormat("allocations in the step %d (first step: %d mallocs, %.3f GB)\n",
                         s.allocations, s.first.mallocs, s.first.malloc_bytes / 1e9);
    o << absl::StrFormat(
        "non-GEMM bytes %.3f GB (kernels %.3f, memsets %.3f, device copies r+w %.3f); GEMM "
        "FLOPs %.4g (16-bit %.4g, fp32 %.4g); activation arena %.3f GB\n",
        s.non_gemm_bytes / 1e9, s.kernel_bytes / 1e9, k.memset_bytes / 1e9,
        2 * k.d2d_copy_bytes / 1e9, s.gemm_flops, s.gemm_16bit_flops, s.gemm_fp32_flops,
        s.arena_bytes / 1e9);
    if (!s.clip_applied && c.max_grad_norm > 0) {
      o << "clipping's ScaleInPlace not issued (the norm did not exceed max_grad_norm"
        << (c.dry ? ": a dry run's gradients are zeros" : "")
        << "); when clipping acts: +1 launch, +" << absl::StrFormat("%.3f", 8 * c.params / 1e9)
        << " GB\n";
    }
    for (const RooflineDevice& d : DefaultDevices()) {
      if (d.precision != s.precision) continue;
      const Prediction p = Predict(s, d, a, model_flops);
      o << absl::StrFormat(
          "roofline %-5s step %.2f ms = GEMM %.2f + memory %.2f + kernel compute %.2f + overhead "
          "%.2f; MFU %.1f%%; outside GEMMs %.1f%% of the step (%.0f%% of GEMM time)\n",
          d.name, p.step_seconds * 1e3, p.gemm_seconds * 1e3, p.memory_seconds * 1e3,
          p.kernel_compute_seconds * 1e3, p.overhead_seconds * 1e3, 100 * p.mfu,
          100 * p.outside_gemm_share, 100 * (p.step_seconds - p.gemm_seconds) / p.gemm_seconds);
    }
  }
  o << absl::StrFormat(
      "\nroofline: step = GEMM FLOPs / GEMM ceiling + non-GEMM bytes / copy bandwidth + per "
      "non-GEMM kernel, its FLOPs / fp32 ceiling beyond its bytes' time + %.1f us per operation + "
      "%.1f us per blocking sync (no overlap, no graphs)\n",
      a.launch_seconds * 1e6, a.sync_seconds * 1e6);
  o << kTargets << "\n";
  return o.str();
}

std::string JsonReport(const CensusShape& c, const std::vector<StepSummary>& steps,
                       const RooflineAssumptions& a) {
  std::ostringstream o;
  const double model_flops = ModelFlops(c);
  o << "{\"shape\":{\"batch\":" << c.batch << ",\"seq\":" << c.seq << ",\"layers\":" << c.layers
    << ",\"hidden\":" << c.hidden << ",\"intermediate\":" << c.intermediate
    << ",\"heads\":" << c.heads << ",\"vocab\":" << c.vocab
    << "},\"dry\":" << (c.dry ? "true" : "false") << ",\"params\":" << Num(c.params)
    << ",\"non_embedding_params\":" << Num(c.non_embedding_params)
    << ",\"model_flops\":" << Num(model_flops)
    << ",\"model_flops_formula\":\"6*non_embedding_params*B*S + 12*L*S^2*H*B\""
    << ",\"assumptions\":{\"launch_seconds\":" << Num(a.launch_seconds)
    << ",\"sync_seconds\":" << Num(a.sync_seconds) << "},\"targets\":{\"non_gemm_bytes\":9e9,"
    << "\"blocking_syncs\":0,\"allocations\":0,\"launches\":200,\"arena_bytes\":1.5e9,"
    << "\"h200_mfu\":0.55,\"p40_outside_gemm_over_gemm\":0.25},\"steps\":[";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepSummary& s = steps[i];
    const cuda_emu::Census& k = s.census;
    o << (i ? "," : "") << "{\"precision\":" << JsonString(s.precision)
      << ",\"kernel_launches\":" << s.kernel_launches << ",\"gemm_calls\":" << s.gemm_calls
      << ",\"launches\":" << s.kernel_launches + s.gemm_calls
      << ",\"undeclared_launches\":" << s.undeclared_launches << ",\"operations\":" << s.operations
      << ",\"blocking_syncs\":" << s.blocking_syncs << ",\"syncs\":{\"stream\":" << k.stream_syncs
      << ",\"device\":" << k.device_syncs << ",\"event\":" << k.event_syncs
      << ",\"sync_copies\":" << k.sync_copies << ",\"pageable_async_d2h\":" << k.pageable_async_d2h
      << "}"
      << ",\"pageable_async_h2d\":" << k.pageable_async_h2d
      << ",\"async_copies\":" << k.async_copies << ",\"memsets\":" << k.memsets
      << ",\"memset_bytes\":" << Num(k.memset_bytes)
      << ",\"d2d_copy_bytes\":" << Num(k.d2d_copy_bytes) << ",\"allocations\":" << s.allocations
      << ",\"first_step_mallocs\":" << s.first.mallocs
      << ",\"first_step_malloc_bytes\":" << Num(s.first.malloc_bytes)
      << ",\"kernel_bytes\":" << Num(s.kernel_bytes)
      << ",\"non_gemm_bytes\":" << Num(s.non_gemm_bytes) << ",\"gemm_flops\":" << Num(s.gemm_flops)
      << ",\"gemm_16bit_flops\":" << Num(s.gemm_16bit_flops)
      << ",\"gemm_fp32_flops\":" << Num(s.gemm_fp32_flops)
      << ",\"arena_bytes\":" << Num(s.arena_bytes)
      << ",\"clip_applied\":" << (s.clip_applied ? "true" : "false") << ",\"kernels\":{";
    bool first = true;
    for (const auto& [name, n] : k.kernels) {
      o << (first ? "" : ",") << JsonString(name) << ":{\"launches\":" << n.launches
        << ",\"declared\":" << n.declared << ",\"bytes_read\":" << Num(n.bytes_read)
        << ",\"bytes_written\":" << Num(n.bytes_written) << ",\"flops\":" << Num(n.flops) << "}";
      first = false;
    }
    o << "},\"gemms\":{";
    first = true;
    for (const auto& [key, g] : k.gemms) {
      o << (first ? "" : ",") << JsonString(key) << ":{\"calls\":" << g.calls
        << ",\"flops\":" << Num(g.flops) << "}";
      first = false;
    }
    o << "},\"roofline\":{";
    first = true;
    for (const RooflineDevice& d : DefaultDevices()) {
      if (d.precision != s.precision) continue;
      const Prediction p = Predict(s, d, a, model_flops);
      o << (first ? "" : ",") << JsonString(d.name) << ":{\"gemm_seconds\":" << Num(p.gemm_seconds)
        << ",\"memory_seconds\":" << Num(p.memory_seconds)
        << ",\"kernel_compute_seconds\":" << Num(p.kernel_compute_seconds)
        << ",\"overhead_seconds\":" << Num(p.overhead_seconds)
        << ",\"step_seconds\":" << Num(p.step_seconds) << ",\"mfu\":" << Num(p.mfu)
        << ",\"outside_gemm_share\":" << Num(p.outside_gemm_share)
        << ",\"gemm_16bit_flops_per_second\":" << Num(d.gemm_16bit_flops)
        << ",\"gemm_fp32_flops_per_second\":" << Num(d.gemm_fp32_flops)
        << ",\"bytes_per_second\":" << Num(d.bytes_per_second)
        << ",\"source\":" << JsonString(d.source) << "}";
      first = false;
    }
    o << "}}";
  }
  o << "]}\n";
  return o.str();
}

absl::Status CheckBaseline(const std::string& path, const std::vector<StepSummary>& steps) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the census baseline"));
  std::string line, failures;
  int number = 0, bounds = 0;
  while (std::getline(in, line)) {
    ++number;
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(text, ' ', absl::SkipEmpty());
    double bound = 0;
    if (f.size() != 3 || !absl::SimpleAtod(f[2], &bound)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:%d: expected '<precision> <figure> <max>', got '%s'", path, number, line));
    }
    const StepSummary* s = nullptr;
    for (const StepSummary& x : steps) {
      if (x.precision == f[0]) s = &x;
    }
    if (s == nullptr) continue;  // that precision was not counted in this run
    double value = 0;
    if (f[1] == "launches") {
      value = static_cast<double>(s->kernel_launches + s->gemm_calls);
    } else if (f[1] == "blocking_syncs") {
      value = static_cast<double>(s->blocking_syncs);
    } else if (f[1] == "non_gemm_bytes") {
      value = s->non_gemm_bytes;
    } else if (f[1] == "arena_bytes") {
      value = s->arena_bytes;
    } else if (f[1] == "allocations") {
      value = static_cast<double>(s->allocations);
    } else if (f[1] == "gemm_flops") {
      value = s->gemm_flops;
    } else if (f[1] == "undeclared_launches") {
      value = static_cast<double>(s->undeclared_launches);
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: unknown figure '%s'", path, number, f[1]));
    }
    ++bounds;
    if (value > bound) {
      absl::StrAppendFormat(&failures, "\n  %s:%d: %s %s = %.17g exceeds the baseline %.17g", path,
                            number, f[0], f[1], value, bound);
    }
  }
  if (bounds == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no bound for a precision counted in this run"));
  }
  if (!failures.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the step census exceeds its baseline (the step gave speed back):", failures));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer::cuda
