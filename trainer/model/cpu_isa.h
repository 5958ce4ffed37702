// The instruction-set level the CPU trainer's elementwise hot loops (LayerNorm, GELU, softmax,
// dropout, residual adds, bias gradients, AdamW, gradient norm and clipping) run at. Each loop
// is compiled three times (cpu_kernels_*.cc): for baseline x86-64 (SSE2), for AVX2 + FMA, and
// for AVX-512 (F/BW/DQ/VL, 512-bit vectors), and calls go through the table of the active
// level. The default is the best level this CPU supports (checked with
// __builtin_cpu_supports, nothing vendor-specific); RINGMASTER_CPU_ISA=baseline|avx2|avx512|auto
// or SetIsa picks another (tests compare each level against the baseline). GEMMs are
// OpenBLAS's, which dispatches on its own (openblas_get_corename).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer::cpu {

enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

const char* IsaName(Isa isa);
// "baseline", "avx2", "avx512"; "auto" = BestSupportedIsa().
absl::StatusOr<Isa> ParseIsa(std::string_view name);
bool IsaSupported(Isa isa);
Isa BestSupportedIsa();

// The level the loops dispatch to now.
Isa ActiveIsa();
// Switches every later call to `isa`'s loops; an error naming the level if this CPU lacks it.
absl::Status SetIsa(Isa isa);
// Applies a RINGMASTER_CPU_ISA value (empty: nothing changes); an error naming the variable and
// its value if it is not a level or this CPU cannot run it. The trainer passes the value its
// environment reader parsed (TrainerEnv::cpu_isa, trainer/parallel/dist_env.h).
absl::Status SetIsaByName(std::string_view name);
// SetIsaByName(getenv("RINGMASTER_CPU_ISA")), for the benchmark and tests, which have no
// TrainerEnv.
absl::Status SetIsaFromEnv();

}  // namespace ringmaster::trainer::cpu
