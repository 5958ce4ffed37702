#include "trainer/model/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/model/cpu_kernels.h"

namespace ringmaster::trainer::cpu {
namespace {

// -1 until first use: then the best level this CPU supports.
std::atomic<int> g_active{-1};

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "baseline";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

absl::StatusOr<Isa> ParseIsa(std::string_view name) {
  if (name == "baseline") return Isa::kBaseline;
  if (name == "avx2") return Isa::kAvx2;
  if (name == "avx512") return Isa::kAvx512;
  if (name == "auto") return BestSupportedIsa();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", std::string(name), "' is not an ISA level (baseline, avx2, avx512 or auto)"));
}

bool IsaSupported(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kBaseline:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == Isa::kBaseline;
#endif
}

Isa BestSupportedIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBaseline;
}

Isa ActiveIsa() {
  int v = g_active.load(std::memory_order_acquire);
  if (v < 0) {
    v = static_cast<int>(BestSupportedIsa());
    int expected = -1;
    if (!g_active.compare_exchange_strong(expected, v, std::memory_order_acq_rel)) v = expected;
  }
  return static_cast<Isa>(v);
}

absl::Status SetIsa(Isa isa) {
  if (!IsaSupported(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this CPU cannot run the ", IsaName(isa),
                     " loops (best supported: ", IsaName(BestSupportedIsa()), ")"));
  }
  g_active.store(static_cast<int>(isa), std::memory_order_release);
  return absl::OkStatus();
}

absl::Status SetIsaFromEnv() {
  const char* v = std::getenv("RINGMASTER_CPU_ISA");
  return SetIsaByName(v != nullptr ? v : "");
}

absl::Status SetIsaByName(std::string_view v) {
  if (v.empty()) return absl::OkStatus();
  absl::StatusOr<Isa> isa = ParseIsa(v);
  absl::Status st = isa.ok() ? SetIsa(*isa) : isa.status();
  if (!st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat("RINGMASTER_CPU_ISA=", std::string(v), ": ", st.message()));
  }
  return absl::OkStatus();
}

const Kernels& KernelsFor(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return kAvx512Kernels;
  if (isa == Isa::kAvx2) return kAvx2Kernels;
#endif
  (void)isa;
  return kBaselineKernels;
}

const Kernels& ActiveKernels() { return KernelsFor(ActiveIsa()); }

}  // namespace ringmaster::trainer::cpu
