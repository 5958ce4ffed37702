// The fp32 elementwise hot loops of the CPU trainer, one table per ISA level (cpu_isa.h). The
// bodies live in cpu_kernels_impl.inc, compiled once per level by cpu_kernels_{baseline,avx2,
// avx512}.cc with that level's flags. Everything they define has internal linkage and they use
// no inline functions from headers (this one includes none): an inline function emitted by the
// AVX-512 file could otherwise be the copy the linker keeps for every caller, and fault on a CPU
// without it.
//
// Results are the same on every level up to rounding: the same formulas, with vector widths
// (and so the order of the sums in LayerNorm, softmax and the norms) and FMA contraction
// differing; dropout masks are identical (integer hashing).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringmaster::trainer::cpu {

enum class Isa : int;  // cpu_isa.h (not included: see above)

struct Kernels {
  // Rows of x[N,H] → y, saving mean and 1/std per row.
  void (*layer_norm_fwd)(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int N, int H, float eps);
  // dx rows (overwritten); thread t of `threads` adds its rows' dgamma, dbeta into
  // partial[t·2H .. t·2H+2H) (dgamma then dbeta), which the caller zeroes and reduces.
  void (*layer_norm_bwd)(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* partial, int threads, int N, int H);
  // y = x·Φ(x); dx = dy·(Φ(x) + x·φ(x)). Φ from erfc by Abramowitz–Stegun 7.1.26 (absolute
  // error ≤ 1.5e-7, PyTorch's vectorised erf), φ from the same exponential.
  void (*gelu_fwd)(const float* x, float* y, size_t n);
  void (*gelu_bwd)(const float* dy, const float* x, float* dx, size_t n);
  // Inverted dropout (the mask of cpu::DropoutForward), parallel.
  void (*dropout_fwd)(float* x, float* mask, size_t n, float p, uint64_t seed);
  // x[i] *= m[i] and y[i] += r[i], parallel.
  void (*mul)(float* x, const float* m, size_t n);
  void (*add)(float* y, const float* r, size_t n);
  // One (batch, head) of attention, serial (the caller runs heads in parallel): masked softmax
  // of scale·scores + bias in place; its backward; the dropout of probabilities into out with
  // the mask in `mask` (keep iff UniformAt(seed, i) >= p).
  void (*softmax_fwd)(float* scores, const float* bias, int S, float scale);
  void (*softmax_bwd)(const float* probs, float* dprobs, int S, float scale);
  void (*dropout_probs)(const float* probs, float* mask, float* out, size_t n, float p,
                        uint64_t seed);
  // Column sums of x[N,H]: thread t of `threads` adds its rows into partial[t·H .. t·H+H).
  void (*column_sums)(const float* x, float* partial, int threads, int N, int H);
  // AdamW over [begin, end) (torch.optim.AdamW's update, decay = 1 − lr·weight_decay or 1).
  void (*adamw)(float* params, const float* grads, float* m, float* v, size_t begin, size_t end,
                float decay, float b1, float b2, float step_size, float bc2_sqrt, float eps);
  // Σ g² in double; x[i] *= c. Parallel.
  double (*sum_squares)(const float* g, size_t n);
  void (*scale)(float* x, size_t n, float c);
};

const Kernels& KernelsFor(Isa isa);  // a level this build lacks → the baseline's
const Kernels& ActiveKernels();      // KernelsFor(ActiveIsa())

// The tables of each compiled level (cpu_kernels_*.cc), constant-initialised (no code of a
// level runs before it is chosen). The AVX ones exist only in x86-64 builds.
extern const Kernels kBaselineKernels;
#if defined(__x86_64__)
extern const Kernels kAvx2Kernels;
extern const Kernels kAvx512Kernels;
#endif

}  // namespace ringmaster::trainer::cpu
