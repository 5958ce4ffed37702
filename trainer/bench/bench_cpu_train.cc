// CPU training throughput of the BERT trainer against the machine's sgemm ceiling and PyTorch.
//
//   build/trainer/bench_cpu_train [--steps N] [--no-torch] [--only a|b]
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
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "trainer/model/bert_model.h"
#include "trainer/optim/adamw.h"

namespace rt = ringmaster::trainer;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
};

double FlopsPerSample(const rt::BertConfig& c, int seq) {
  const double d = c.hidden_size, L = c.num_hidden_layers, I = c.intermediate_size;
  const double non_embedding = L * (4 * d * d + 4 * d + 2 * d * I + d + I + 4 * d) + (d * d + d) +
                               (d * c.num_labels + c.num_labels);
  return (6 * non_embedding + 12 * L * d * seq) * seq;
}

Row RunOurs(const BenchConfig& bc, int steps, double* first_loss, double* last_loss) {
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
  r.step_ms = med * 1e3;
  r.samples_per_s = B / med;
  r.gflops = FlopsPerSample(c, S) * r.samples_per_s / 1e9;
  r.rss_mib = PeakRssMiB();
  return r;
}

bool RunTorch(const BenchConfig& bc, int steps, Row* out) {
  const char* py = std::getenv("RINGMASTER_PYTHON");
  const char* src = std::getenv("RINGMASTER_SOURCE_DIR");
  if (py == nullptr || src == nullptr) return false;
  char cmd[1024];
  std::snprintf(cmd, sizeof(cmd),
                "%s %s/trainer/bench/torch_bert_bench.py --hidden %d --layers %d --heads %d "
                "--inter %d --seq %d --batch %d --steps %d --threads %d",
                py, src, bc.hidden, bc.layers, bc.heads, bc.inter, bc.seq, bc.batch, steps,
                omp_get_max_threads());
  FILE* p = popen(cmd, "r");
  if (p == nullptr) return false;
  char line[512];
  bool ok = false;
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    double sps, rss, ms;
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

}  // namespace

int main(int argc, char** argv) {
  int steps = 5;
  bool torch = true;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    if (a == "--no-torch") torch = false;
    if (a == "--only" && i + 1 < argc) only = argv[++i];
  }
  const double peak = MeasureSgemmPeak();
  std::printf("threads %d, sgemm peak (2048^3, best of 5): %.1f GFLOP/s\n", omp_get_max_threads(),
              peak);
  const BenchConfig configs[] = {{"a", 256, 4, 4, 1024, 128, 16}, {"b", 768, 12, 12, 3072, 128, 8}};
  std::printf("%-4s %-22s %10s %10s %9s %8s %9s | %10s %9s %8s | %6s\n", "cfg", "model",
              "samples/s", "tokens/s", "GFLOP/s", "%sgemm", "RSS MiB", "torch s/s", "torch MiB",
              "torch ms", "ratio");
  for (const BenchConfig& bc : configs) {
    if (!only.empty() && only != bc.name) continue;
    double l0 = 0, l1 = 0;
    const Row ours = RunOurs(bc, steps, &l0, &l1);
    if (!(l1 < l0)) {
      std::fprintf(stderr, "config %s: loss did not fall on a fixed batch (%.4f -> %.4f)\n",
                   bc.name, l0, l1);
      return 1;
    }
    Row th;
    const bool have_torch = torch && RunTorch(bc, steps, &th);
    char model[64];
    std::snprintf(model, sizeof(model), "H%d L%d A%d I%d T%d B%d", bc.hidden, bc.layers, bc.heads,
                  bc.inter, bc.seq, bc.batch);
    std::printf("%-4s %-22s %10.2f %10.0f %9.1f %7.1f%% %9.0f | ", bc.name, model,
                ours.samples_per_s, ours.samples_per_s * bc.seq, ours.gflops,
                100.0 * ours.gflops / peak, ours.rss_mib);
    if (have_torch) {
      std::printf("%10.2f %9.0f %8.0f | %5.2fx\n", th.samples_per_s, th.rss_mib, th.step_ms,
                  ours.samples_per_s / th.samples_per_s);
    } else {
      std::printf("%10s %9s %8s | %6s\n", "-", "-", "-", "-");
    }
  }
  return 0;
}
