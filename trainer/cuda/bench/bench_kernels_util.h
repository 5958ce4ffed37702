// Helpers of bench_kernels (trainer/cuda/bench/bench_kernels.cc): device buffers, the comparison
// against a CPU reference, CUDA-event timing and the table / JSON output. A failing CUDA call
// throws BenchError naming the call; main() reports it and exits 1.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace ringmaster::trainer::cuda::bench {

struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw BenchError(absl::StrFormat("%s: %s", what, cudaGetErrorString(e)));
  }
}
#define BENCH_CHECK(expr) ::ringmaster::trainer::cuda::bench::Check((expr), #expr)

// A device array of T: uploaded from a host vector or allocated (contents undefined).
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) {
    BENCH_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) { Upload(h); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p_); }
  void Upload(const std::vector<T>& h) {
    if (h.size() != n_) throw BenchError("Dev::Upload: size mismatch");
    BENCH_CHECK(cudaMemcpy(p_, h.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> Download() const {
    std::vector<T> h(n_);
    BENCH_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* p() const { return p_; }
  size_t n() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

inline std::vector<float> Normal(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Worst element of `got` against `ref`: pass when |got − ref| <= atol + rtol·|ref| everywhere
// (NaN fails). max_rel is |got − ref| / |ref| over the elements with |ref| > atol (so the
// relative figure is not dominated by near-zero references).
struct Error {
  double max_abs = 0, max_rel = 0;
  bool ok = true;
  std::string where;  // the first failing element, for the report
};

template <typename A, typename B>
void Compare(const char* what, const std::vector<A>& ref, const std::vector<B>& got, double atol,
             double rtol, Error* e) {
  if (ref.size() != got.size()) {
    e->ok = false;
    e->where = absl::StrFormat("%s: size %d vs %d", what, ref.size(), got.size());
    return;
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = static_cast<double>(ref[i]), g = static_cast<double>(got[i]);
    const double d = std::abs(g - r);
    const bool bad = !(d <= atol + rtol * std::abs(r));  // NaN → bad
    if (!std::isnan(d)) {
      e->max_abs = std::max(e->max_abs, d);
      if (std::abs(r) > atol) e->max_rel = std::max(e->max_rel, d / std::abs(r));
    }
    if (bad && e->ok) {
      e->ok = false;
      e->where = absl::StrFormat("%s[%d]: got %.9g, want %.9g", what, i, g, r);
    }
  }
}

// Milliseconds per call of `launch` on `stream`: warm-up calls, then a short probe sizes the
// measured run to about `target_ms` (between 3 and 2000 calls), all timed by one event pair.
inline double TimeMs(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream,
                     double target_ms) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  auto timed = [&](int iters) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) launch(stream);
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms);
  };
  for (int i = 0; i < 3; ++i) launch(stream);  // warm-up: first-launch and plan costs
  BENCH_CHECK(cudaStreamSynchronize(stream));
  const double probe = std::max(timed(3) / 3, 1e-4);
  const int iters = static_cast<int>(std::clamp(target_ms / probe, 3.0, 2000.0));
  const double ms = timed(iters) / iters;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// One row of the table. `bytes`: the traffic the kernel must do at least (each input read
// once, each output written once); `flops` for GEMMs. `ceiling`: which measured ceiling the
// fraction is of ("bw", "fp32", "bf16").
struct Row {
  Row(std::string k, std::string s, std::string c)
      : kernel(std::move(k)), shape(std::move(s)), ceiling(std::move(c)) {}
  std::string kernel, shape, ceiling;
  Error err;
  double bytes = 0, flops = 0;
  double ms = -1;  // < 0: not timed
};

inline std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

struct Ceilings {
  double bw_gbs = 0, fp32_tflops = 0, bf16_tflops = 0;
  double Of(const std::string& which) const {
    return which == "bw" ? bw_gbs : which == "fp32" ? fp32_tflops : bf16_tflops;
  }
};

// The rate of a row: GB/s for bandwidth rows, TFLOP/s for GEMMs.
inline double Rate(const Row& r) {
  if (r.ms <= 0) return 0;
  return r.flops > 0 ? r.flops / (r.ms * 1e-3) / 1e12 : r.bytes / (r.ms * 1e-3) / 1e9;
}

inline void PrintTable(const std::vector<Row>& rows, const Ceilings& c, bool timed) {
  std::printf("%-22s %-26s %-5s %10s %10s %10s %12s %7s\n", "kernel", "shape", "valid", "max_abs",
              "max_rel", "us/call", "rate", "of_peak");
  for (const Row& r : rows) {
    std::string rate = "-", frac = "-", us = "-";
    if (timed && r.ms > 0) {
      us = absl::StrFormat("%.2f", r.ms * 1e3);
      rate = absl::StrFormat("%.3g %s", Rate(r), r.flops > 0 ? "TFLOP/s" : "GB/s");
      const double peak = c.Of(r.ceiling);
      if (peak > 0) frac = absl::StrFormat("%.2f", Rate(r) / peak);
    }
    std::printf("%-22s %-26s %-5s %10.3g %10.3g %10s %12s %7s\n", r.kernel.c_str(), r.shape.c_str(),
                r.err.ok ? "ok" : "FAIL", r.err.max_abs, r.err.max_rel, us.c_str(), rate.c_str(),
                frac.c_str());
    if (!r.err.ok) std::printf("  %s: %s\n", r.kernel.c_str(), r.err.where.c_str());
  }
}

inline std::string Json(const std::vector<Row>& rows, const Ceilings& c, bool emulated, bool small,
                        bool timed, const std::string& device) {
  std::string o = absl::StrFormat(
      "{\n  \"device\": \"%s\",\n  \"emulated\": %s,\n  \"small\": %s,\n  \"timed\": %s,\n"
      "  \"ceilings\": {\"copy_gbs\": %.6g, \"fp32_gemm_tflops\": %.6g, "
      "\"bf16_gemm_tflops\": %.6g},\n  \"kernels\": [\n",
      JsonEscape(device), emulated ? "true" : "false", small ? "true" : "false",
      timed ? "true" : "false", c.bw_gbs, c.fp32_tflops, c.bf16_tflops);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double peak = c.Of(r.ceiling);
    o += absl::StrFormat(
        "    {\"kernel\": \"%s\", \"shape\": \"%s\", \"valid\": %s, \"max_abs\": %.6g, "
        "\"max_rel\": %.6g, \"bytes\": %.6g, \"flops\": %.6g, \"ceiling\": \"%s\", "
        "\"us_per_call\": %.6g, \"rate\": %.6g, \"fraction_of_ceiling\": %.6g}%s\n",
        JsonEscape(r.kernel), JsonEscape(r.shape), r.err.ok ? "true" : "false", r.err.max_abs,
        r.err.max_rel, r.bytes, r.flops, r.ceiling, r.ms > 0 ? r.ms * 1e3 : 0.0, Rate(r),
        peak > 0 && r.ms > 0 ? Rate(r) / peak : 0.0, i + 1 < rows.size() ? "," : "");
  }
  o += "  ]\n}\n";
  return o;
}

}  // namespace ringmaster::trainer::cuda::bench
