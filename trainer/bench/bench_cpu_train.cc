// CPU training throughput of the BERT trainer against the machine's sgemm ceiling and PyTorch.
//
//   build/trainer/bench_cpu_train [--steps N] [--no-torch] [--only a|b] [--profile] [--kernels]
//   [--no-peak]
//
// The header names the machine: CPU model, the ISA level of the elementwise loops
// (RINGMASTER_CPU_ISA), OpenBLAS's kernel (openblas_get_corename) and build, and the threads.
// --profile adds, per configuration, the time per step of each kind of op (linear GEMMs,
// attention, LayerNorm, GELU, dropout, bias gradients, clip + AdamW, embeddings/loss, rest)
// for this trainer and, beside it, PyTorch's (torch.profiler self CPU time, same categories).
// --kernels times each elementwise loop on every ISA level this CPU runs, then exits.
//
// For each configuration: samples/s, tokens/s, GFLOP/s (6·N + 12·L·d·T per token, N = non-
// embedding parameters) as a fraction of sgemm measured in the same run, peak RSS, and the same
// configuration in PyTorch (transformers BertForSequenceClassification, same threads) when
// RINGMASTER_PYTHON has torch + transformers. Validates before timing: the loss must fall over
// the warm-up steps on a fixed batch.
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "trainer/model/bert_model.h"
#include "trainer/model/cpu_isa.h"
#include "trainer/model/cpu_kernels.h"
#include "trainer/model/omp_wait_default.h"
#include "trainer/model/op_profile.h"
#include "trainer/optim/adamw.h"

namespace rt = ringmaster::trainer;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "model name", "vendor", "family F model M" from /proc/cpuinfo.
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::map<std::string, std::string> kv;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // first processor only
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    kv[k] = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
  }
  return kv["model name"] + " (" + kv["vendor_id"] + ", family " + kv["cpu family"] + " model " +
         kv["model"] + ")";
}

const char* EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

void PrintHeader() {
  std::printf("cpu: %s, %d logical CPUs available\n", CpuModel().c_str(), omp_get_num_procs());
  std::printf("elementwise loops: %s (best this CPU supports: %s; RINGMASTER_CPU_ISA=%s)\n",
              rt::cpu::IsaName(rt::cpu::ActiveIsa()), rt::cpu::IsaName(rt::cpu::BestSupportedIsa()),
              EnvOr("RINGMASTER_CPU_ISA", "unset"));
  const int par = openblas_get_parallel();
  std::printf("openblas: core %s, config \"%s\", threading %s, %d threads\n",
              openblas_get_corename(), openblas_get_config(),
              par == 0   ? "none"
              : par == 1 ? "pthreads"
              : par == 2 ? "OpenMP"
                         : "?",
              openblas_get_num_threads());
  std::printf(
      "threads: OpenMP max %d, OMP_NUM_THREADS=%s; OpenMP waits %s (OMP_WAIT_POLICY=%s, "
      "GOMP_SPINCOUNT=%s)\n",
      omp_get_max_threads(), EnvOr("OMP_NUM_THREADS", "unset"), rt::cpu::OmpWaitPolicyDescription(),
      EnvOr("OMP_WAIT_POLICY", "unset"), EnvOr("GOMP_SPINCOUNT", "unset"));
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Best of several n³ sgemm runs, in GFLOP/s.
double MeasureSgemmPeak() {
  const int n = 2048;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a), c(a.size());
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = Now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    best = std::max(best, 2.0 * n * n * n / (Now() - t0) / 1e9);
  }
  return best;
}

struct BenchConfig {
  const char* name;
  int hidden, layers, heads, inter, seq, batch;
};

struct Row {
  double samples_per_s = 0, gflops = 0, rss_mib = 0, step_ms = 0;
  std::map<std::string, double> profile_ms;  // per step, by category (--profile)
};

// The categories of the profile table, in order; PyTorch's script prints the same names.
const char* const kProfileKeys[] = {"gemm", "attention", "layernorm", "gelu", "dropout",
                                    "bias", "optimizer", "embedding", "rest"};

double FlopsPerSample(const rt::BertConfig& c, int seq) {
  const double d = c.hidden_size, L = c.num_hidden_layers, I = c.intermediate_size;
  const double non_embedding = L * (4 * d * d + 4 * d + 2 * d * I + d + I + 4 * d) + (d * d + d) +
                               (d * c.num_labels + c.num_labels);
  return (6 * non_embedding + 12 * L * d * seq) * seq;
}

Row RunOurs(const BenchConfig& bc, int steps, bool profile, double* first_loss, double* last_loss) {
  rt::BertConfig c;
  c.hidden_size = bc.hidden;
  c.num_hidden_layers = bc.layers;
  c.num_attention_heads = bc.heads;
  c.intermediate_size = bc.inter;
  c.num_labels = 2;
  const rt::ParamLayout layout = rt::MakeBertParamLayout(c);
  std::vector<float> params(layout.total), grads(layout.total);
  rt::InitBertParams(c, layout, 1, params.data());
  rt::BertModel<float> model(c, layout);
  rt::AdamW opt(layout, {});
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(1000, c.vocab_size - 1);
  const int B = bc.batch, S = bc.seq;
  std::vector<int32_t> ids(static_cast<size_t>(B) * S), types(ids.size(), 0);
  std::vector<float> mask(ids.size(), 1.0f), labels(B);
  for (auto& x : ids) x = tok(rng);
  for (int b = 0; b < B; ++b) labels[b] = static_cast<float>(b % 2);
  rt::BertInputs in{B, S, ids.data(), types.data(), mask.data(), labels.data()};
  auto step = [&](int i) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    const float loss = model.Forward(params.data(), in, true, static_cast<uint64_t>(i));
    model.Backward(params.data(), grads.data(), 1.0f);
    rt::ClipGradNorm(grads.data(), grads.size(), 1.0);
    opt.Step(params.data(), grads.data(), 5e-5);
    return loss;
  };
  // Validate first: a few steps on one fixed batch must lower its (dropout-free) loss.
  *first_loss = model.Forward(params.data(), in, false, 0);
  for (int i = 0; i < 4; ++i) step(i);
  *last_loss = model.Forward(params.data(), in, false, 0);
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    const double t0 = Now();
    step(100 + i);
    times.push_back(Now() - t0);
  }
  std::sort(times.begin(), times.end());
  const double med = times[times.size() / 2];
  Row r;
  if (profile) {
    // Separate profiled steps, so that the timed ones above carry no profiling cost.
    rt::prof::Take();
    rt::prof::Enable(true);
    const double t0 = Now();
    for (int i = 0; i < steps; ++i) step(200 + i);
    const double total_ms = (Now() - t0) * 1e3 / steps;
    rt::prof::Enable(false);
    const std::array<double, rt::prof::kOpCount> s = rt::prof::Take();
    double accounted = 0;
    for (int k = 0; k < rt::prof::kOpCount; ++k) {
      r.profile_ms[kProfileKeys[k]] = s[k] * 1e3 / steps;
      accounted += s[k] * 1e3 / steps;
    }
    r.profile_ms["rest"] = total_ms - accounted;
    r.profile_ms["total"] = total_ms;
  }
  r.step_ms = med * 1e3;
  r.samples_per_s = B / med;
  r.gflops = FlopsPerSample(c, S) * r.samples_per_s / 1e9;
  r.rss_mib = PeakRssMiB();
  return r;
}

bool RunTorch(const BenchConfig& bc, int steps, bool profile, Row* out) {
  const char* py = std::getenv("RINGMASTER_PYTHON");
  const char* src = std::getenv("RINGMASTER_SOURCE_DIR");
  if (py == nullptr || src == nullptr) return false;
  char cmd[1024];
  // PyTorch runs with its own OpenMP default, not the trainer's (omp_wait_default.h).
  std::snprintf(
      cmd, sizeof(cmd),
      "%s%s %s/trainer/bench/torch_bert_bench.py --hidden %d --layers %d --heads %d "
      "--inter %d --seq %d --batch %d --steps %d --threads %d%s",
      rt::cpu::OmpWaitDefaultApplied() ? "env -u OMP_WAIT_POLICY -u RINGMASTER_OMP_WAIT " : "", py,
      src, bc.hidden, bc.layers, bc.heads, bc.inter, bc.seq, bc.batch, steps, omp_get_max_threads(),
      profile ? " --profile" : "");
  FILE* p = popen(cmd, "r");
  if (p == nullptr) return false;
  char line[4096];
  bool ok = false;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    double sps, rss, ms;
    char key[64];
    if (std::sscanf(line, "PROFILE %63s %lf", key, &ms) == 2) {
      out->profile_ms[key] = ms;
      continue;
    }
    if (std::strncmp(line, "INFO ", 5) == 0 || std::strncmp(line, "TOP ", 4) == 0) {
      std::printf("  torch %s", line);
      continue;
    }
    if (std::sscanf(line, "RESULT samples_per_s=%lf rss_mib=%lf step_ms=%lf", &sps, &rss, &ms) ==
        3) {
      out->samples_per_s = sps;
      out->rss_mib = rss;
      out->step_ms = ms;
      ok = true;
    }
  }
  return pclose(p) == 0 && ok;
}

void PrintProfile(const Row& ours, const Row& torch, bool have_torch) {
  std::printf("  %-12s %12s %7s | %12s %7s\n", "op (per step)", "ours ms", "share", "torch ms",
              "share");
  const double ot = ours.profile_ms.count("total") ? ours.profile_ms.at("total") : 0;
  const double tt =
      have_torch && torch.profile_ms.count("total") ? torch.profile_ms.at("total") : 0;
  for (const char* k : kProfileKeys) {
    const double o = ours.profile_ms.count(k) ? ours.profile_ms.at(k) : 0;
    std::printf("  %-12s %12.1f %6.1f%% | ", k, o, ot > 0 ? 100 * o / ot : 0);
    if (tt > 0) {
      const double t = torch.profile_ms.count(k) ? torch.profile_ms.at(k) : 0;
      std::printf("%12.1f %6.1f%%\n", t, 100 * t / tt);
    } else {
      std::printf("%12s %7s\n", "-", "-");
    }
  }
  std::printf("  %-12s %12.1f %7s | ", "total", ot, "");
  if (tt > 0) {
    std::printf("%12.1f\n", tt);
  } else {
    std::printf("%12s\n", "-");
  }
}

// --kernels: each elementwise loop on config (b)'s shapes (N = 1024 rows, H 768, I 3072, 12
// heads of 128²) on every level this CPU runs, plus the libm GELU the loops replaced, in ms.
void BenchKernels() {
  const int N = 1024, H = 768, I = 3072, S = 128, heads = 96;
  const size_t ni = static_cast<size_t>(N) * I, nh = static_cast<size_t>(N) * H;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(ni), dy(ni), y(ni), g(H, 1.0f), b(H, 0.0f), mean(N), rstd(N);
  for (float& v : x) v = nd(rng);
  for (float& v : dy) v = nd(rng);
  std::vector<float> probs(static_cast<size_t>(heads) * S * S), bias(S, 0.0f), mask(probs.size());
  auto time_ms = [](auto&& f) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = Now();
      f();
      best = std::min(best, (Now() - t0) * 1e3);
    }
    return best;
  };
  std::printf("%-9s %9s %9s %9s %9s %9s %9s %9s (ms, best of 5, %d threads)\n", "level", "gelu fwd",
              "gelu bwd", "ln fwd", "ln bwd", "softmax", "dropout", "adamw", omp_get_max_threads());
  const double libm = time_ms([&] {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < ni; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678f));
  });
  std::printf("%-9s %9.2f\n", "libm erff", libm);
  for (rt::cpu::Isa isa : {rt::cpu::Isa::kBaseline, rt::cpu::Isa::kAvx2, rt::cpu::Isa::kAvx512}) {
    if (!rt::cpu::IsaSupported(isa)) {
      std::printf("%-9s (not supported by this CPU)\n", rt::cpu::IsaName(isa));
      continue;
    }
    const rt::cpu::Kernels& k = rt::cpu::KernelsFor(isa);
    std::vector<float> partial(static_cast<size_t>(omp_get_max_threads()) * 2 * H);
    std::vector<float> p(ni), m(ni), v(ni);
    const double gf = time_ms([&] { k.gelu_fwd(x.data(), y.data(), ni); });
    const double gb = time_ms([&] { k.gelu_bwd(dy.data(), x.data(), y.data(), ni); });
    const double lf = time_ms([&] {
      k.layer_norm_fwd(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), N, H,
                       1e-12f);
    });
    const double lb = time_ms([&] {
      k.layer_norm_bwd(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), y.data(),
                       partial.data(), omp_get_max_threads(), N, H);
    });
    const double sm = time_ms([&] {
      std::copy(x.begin(), x.begin() + probs.size(), probs.begin());
#pragma omp parallel for schedule(static)
      for (int h = 0; h < heads; ++h) {
        k.softmax_fwd(probs.data() + static_cast<size_t>(h) * S * S, bias.data(), S, 0.125f);
      }
    });
    const double dr = time_ms([&] { k.dropout_fwd(y.data(), mask.data(), nh, 0.1f, 3); });
    const double aw = time_ms([&] {
      k.adamw(p.data(), dy.data(), m.data(), v.data(), 0, ni, 0.99f, 0.9f, 0.999f, 1e-4f, 0.5f,
              1e-8f);
    });
    std::printf("%-9s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", rt::cpu::IsaName(isa), gf, gb,
                lf, lb, sm, dr, aw);
  }
}

}  // namespace

int main(int argc, char** argv) {
  rt::cpu::ApplyOmpWaitDefault(argv);  // the trainer's default OpenMP waiting (may re-exec)
  int steps = 5;
  bool torch = true;
  bool profile = false;
  bool kernels = false;
  bool no_peak = false;  // skip the sgemm ceiling (its column prints 0)
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    if (a == "--no-torch") torch = false;
    if (a == "--only" && i + 1 < argc) only = argv[++i];
    if (a == "--profile") profile = true;
    if (a == "--kernels") kernels = true;
    if (a == "--no-peak") no_peak = true;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (absl::Status st = rt::cpu::SetIsaFromEnv(); !st.ok()) {
    std::fprintf(stderr, "bench_cpu_train: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  PrintHeader();
  if (kernels) {
    BenchKernels();
    return 0;
  }
  const double peak = no_peak ? 0.0 : MeasureSgemmPeak();
  std::printf("threads %d, sgemm peak (2048^3, best of 5): %.1f GFLOP/s\n", omp_get_max_threads(),
              peak);
  const BenchConfig configs[] = {{"a", 256, 4, 4, 1024, 128, 16}, {"b", 768, 12, 12, 3072, 128, 8}};
  std::printf("%-4s %-22s %10s %10s %9s %8s %9s | %10s %9s %8s | %6s\n", "cfg", "model",
              "samples/s", "tokens/s", "GFLOP/s", "%sgemm", "RSS MiB", "torch s/s", "torch MiB",
              "torch ms", "ratio");
  for (const BenchConfig& bc : configs) {
    if (!only.empty() && only != bc.name) continue;
    double l0 = 0, l1 = 0;
    const Row ours = RunOurs(bc, steps, profile, &l0, &l1);
    if (!(l1 < l0)) {
      std::fprintf(stderr, "config %s: loss did not fall on a fixed batch (%.4f -> %.4f)\n",
                   bc.name, l0, l1);
      return 1;
    }
    Row th;
    const bool have_torch = torch && RunTorch(bc, steps, profile, &th);
    char model[64];
    std::snprintf(model, sizeof(model), "H%d L%d A%d I%d T%d B%d", bc.hidden, bc.layers, bc.heads,
                  bc.inter, bc.seq, bc.batch);
    std::printf("%-4s %-22s %10.2f %10.0f %9.1f %7.1f%% %9.0f | ", bc.name, model,
                ours.samples_per_s, ours.samples_per_s * bc.seq, ours.gflops,
                peak > 0 ? 100.0 * ours.gflops / peak : 0.0, ours.rss_mib);
    if (have_torch) {
      std::printf("%10.2f %9.0f %8.0f | %5.2fx\n", th.samples_per_s, th.rss_mib, th.step_ms,
                  ours.samples_per_s / th.samples_per_s);
    } else {
      std::printf("%10s %9s %8s | %6s\n", "-", "-", "-", "-");
    }
    if (profile) PrintProfile(ours, th, have_torch);
  }
  return 0;
}
