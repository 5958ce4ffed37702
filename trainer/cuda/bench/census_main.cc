// census: the step census of issue #28 (docs/performance-gpu.md "The step census"). Runs
// training steps of BERT (BERT-base, B=32, S=128 by default) on the CUDA engine under the
// emulator, counts the second step exactly (emu/census.h) in bf16 (the H200/A100 step) and fp32
// (the P40 step), and prints the counts with a roofline prediction; --json writes them for
// tools, --check-baseline fails (exit 1) when a figure exceeds its bound.
//
//   census [--batch 32] [--seq 128] [--layers 12] [--precision bf16,fp32] [--execute]
//          [--json FILE] [--check-baseline FILE] [--launch-us 3] [--sync-us 10]
//          [--seed-extra launch|sync] [--small] [--max-grad-norm X] [--compare-execute]
//
// By default the step is a dry run (kernels and GEMMs counted, not executed), so BERT-base
// counts in seconds; --execute runs them (small shapes: the census of both must agree).
// --small counts the small BERT of the engine tests (H=32, 2 heads, vocabulary 53) instead of
// BERT-base's widths; --compare-execute counts the step dry and executed and fails unless both
// censuses agree exactly (the dry run's counts are the executed step's).
// --seed-extra adds one kernel launch or one blocking sync to the counted step (the baseline
// test's proof that it can fail).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "cuda_emu/census.h"
#include "trainer/cuda/bench/census_report.h"
#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/cuda/kernels/kernels.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer::cuda {
namespace {

struct Flags {
  CensusShape shape;
  bool small = false, compare_execute = false;
  std::vector<std::string> precisions = {"bf16", "fp32"};
  std::string json, baseline, seed_extra;
  RooflineAssumptions assumptions;
};

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "census: %s\nusage: census [--batch B] [--seq S] [--layers L] [--precision "
               "bf16,fp32] [--execute] [--json FILE] [--check-baseline FILE] [--launch-us US] "
               "[--sync-us US] [--seed-extra launch|sync]\n",
               why.c_str());
  return 2;
}

bool ParseInt(const char* s, int* out) { return absl::SimpleAtoi(s, out) && *out > 0; }

BertConfig MakeConfig(const Flags& f) {
  BertConfig config;
  if (f.small) {
    config.vocab_size = 53;
    config.hidden_size = 32;
    config.num_attention_heads = 2;
    config.intermediate_size = 40;
  }
  config.num_hidden_layers = f.shape.layers;
  config.max_position_embeddings = std::max(f.small ? 16 : 512, f.shape.seq);
  return config;
}

absl::StatusOr<StepSummary> CountStep(const Flags& f, const std::string& precision) {
  const BertConfig config = MakeConfig(f);
  const ParamLayout layout = MakeBertParamLayout(config);
  std::vector<float> params(layout.total, 0.0f);
  if (!f.shape.dry) InitBertParams(config, layout, 7, params.data());
  CudaTrainerOptions options;
  options.precision = precision == "bf16" ? GemmPrecision::kBf16 : GemmPrecision::kFp32;
  absl::StatusOr<std::unique_ptr<CudaTrainerState>> state =
      CudaTrainerState::Create(config, layout, params, options);
  if (!state.ok()) return state.status();
  params = {};

  const int B = f.shape.batch, S = f.shape.seq;
  std::vector<int32_t> ids(static_cast<size_t>(B) * S), types(ids.size(), 0);
  std::vector<float> mask(ids.size(), 1.0f), labels(B);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = 1 + static_cast<int32_t>(i * 7919 % (config.vocab_size - 1));
  for (int b = 0; b < B; ++b) labels[b] = static_cast<float>(b % 2);
  BertInputs in;
  in.batch = B;
  in.seq = S;
  in.input_ids = ids.data();
  in.token_type_ids = types.data();
  in.attention_mask = mask.data();
  in.labels = labels.data();

  float* scratch = nullptr;
  if (cudaMalloc(&scratch, sizeof(float)) != cudaSuccess) {
    return absl::InternalError("census: cudaMalloc of the seed buffer failed");
  }
  cuda_emu::Census first;
  bool clip_applied = false;
  for (int step = 0; step < 2; ++step) {
    cuda_emu::CensusReset();
    if (absl::Status s = (*state)->BeginStep(); !s.ok()) return s;
    absl::StatusOr<float> loss = (*state)->ForwardBackward(in, 1.0f, 100 + step);
    if (!loss.ok()) return loss.status();
    if (step == 1 && f.seed_extra == "launch") {
      if (ScaleInPlace(scratch, 1, 1.0f, (*state)->stream()) != cudaSuccess) {
        return absl::InternalError("census: the seeded launch failed");
      }
    } else if (step == 1 && f.seed_extra == "sync") {
      cudaStreamSynchronize((*state)->stream());
    }
    absl::StatusOr<StepOutcome> out = (*state)->FinishStep(1e-4, f.shape.max_grad_norm);
    if (!out.ok()) return out.status();
    if (step == 0) first = cuda_emu::CensusSnapshot();
    clip_applied = f.shape.max_grad_norm > 0 && out->grad_norm > f.shape.max_grad_norm;
  }
  const cuda_emu::Census counted = cuda_emu::CensusSnapshot();
  cudaFree(scratch);
  return Summarise(precision, first, counted, static_cast<double>((*state)->model().arena_bytes()),
                   clip_applied);
}

// Where two censuses of one step differ ("" when they agree exactly).
std::string Differences(const cuda_emu::Census& a, const cuda_emu::Census& b) {
  std::string d;
  auto kernels = [](const cuda_emu::Census& c) {
    std::map<std::string, std::tuple<int64_t, int64_t, double, double>> m;
    for (const auto& [n, k] : c.kernels)
      m[n] = {k.launches, k.declared, k.bytes_read, k.bytes_written};
    return m;
  };
  auto gemms = [](const cuda_emu::Census& c) {
    std::map<std::string, std::pair<int64_t, double>> m;
    for (const auto& [n, g] : c.gemms) m[n] = {g.calls, g.flops};
    return m;
  };
  if (kernels(a) != kernels(b)) d += " kernels";
  if (gemms(a) != gemms(b)) d += " gemms";
  if (a.BlockingSyncs() != b.BlockingSyncs() || a.stream_syncs != b.stream_syncs ||
      a.event_syncs != b.event_syncs) {
    d += " syncs";
  }
  if (a.sync_copies != b.sync_copies || a.async_copies != b.async_copies ||
      a.pageable_async_h2d != b.pageable_async_h2d || a.copy_bytes != b.copy_bytes) {
    d += " copies";
  }
  if (a.memsets != b.memsets || a.memset_bytes != b.memset_bytes) d += " memsets";
  if (a.mallocs != b.mallocs || a.frees != b.frees || a.malloc_bytes != b.malloc_bytes) {
    d += " allocations";
  }
  return d;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto need = [&](bool ok) { return ok ? 0 : Usage("bad or missing value for " + a); };
    int rc = 0;
    double us = 0;
    if (a == "--execute" || a == "--small" || a == "--compare-execute") {
      (a == "--execute" ? f.shape.dry
       : a == "--small" ? f.small
                        : f.compare_execute) = a != "--execute";
      continue;
    } else if (a == "--max-grad-norm") {
      rc = need(v && absl::SimpleAtod(v, &f.shape.max_grad_norm));
    } else if (a == "--batch") {
      rc = need(v && ParseInt(v, &f.shape.batch));
    } else if (a == "--seq") {
      rc = need(v && ParseInt(v, &f.shape.seq));
    } else if (a == "--layers") {
      rc = need(v && ParseInt(v, &f.shape.layers));
    } else if (a == "--precision") {
      rc = need(v != nullptr);
      if (rc == 0) f.precisions = absl::StrSplit(v, ',', absl::SkipEmpty());
      for (const std::string& p : f.precisions) {
        if (rc == 0 && p != "bf16" && p != "fp32")
          rc = Usage("--precision: bf16 or fp32, not " + p);
      }
    } else if (a == "--json") {
      rc = need(v != nullptr);
      if (rc == 0) f.json = v;
    } else if (a == "--check-baseline") {
      rc = need(v != nullptr);
      if (rc == 0) f.baseline = v;
    } else if (a == "--seed-extra") {
      rc = need(v && (std::strcmp(v, "launch") == 0 || std::strcmp(v, "sync") == 0));
      if (rc == 0) f.seed_extra = v;
    } else if (a == "--launch-us" || a == "--sync-us") {
      rc = need(v && absl::SimpleAtod(v, &us) && us >= 0);
      (a == "--launch-us" ? f.assumptions.launch_seconds : f.assumptions.sync_seconds) = us * 1e-6;
    } else {
      return Usage("unknown argument " + a);
    }
    if (rc != 0) return rc;
    ++i;
  }
  cuda_emu::SetCensusDryRun(f.shape.dry);

  const BertConfig config = MakeConfig(f);
  f.shape.hidden = config.hidden_size;
  f.shape.intermediate = config.intermediate_size;
  f.shape.heads = config.num_attention_heads;
  f.shape.vocab = config.vocab_size;
  f.shape.params = static_cast<double>(MakeBertParamLayout(config).total);
  f.shape.non_embedding_params =
      f.shape.params - static_cast<double>(config.vocab_size + config.max_position_embeddings +
                                           config.type_vocab_size) *
                           config.hidden_size;

  std::vector<StepSummary> steps;
  for (const std::string& p : f.precisions) {
    absl::StatusOr<StepSummary> s = CountStep(f, p);
    if (!s.ok()) {
      std::fprintf(stderr, "census: the %s step failed: %s\n", p.c_str(),
                   s.status().ToString().c_str());
      return 1;
    }
    steps.push_back(*std::move(s));
  }
  if (f.compare_execute) {
    Flags executed = f;
    executed.shape.dry = false;
    cuda_emu::SetCensusDryRun(false);
    for (const StepSummary& dry : steps) {
      absl::StatusOr<StepSummary> run = CountStep(executed, dry.precision);
      if (!run.ok()) {
        std::fprintf(stderr, "census: the executed %s step failed: %s\n", dry.precision.c_str(),
                     run.status().ToString().c_str());
        return 1;
      }
      const std::string d = Differences(dry.census, run->census) +
                            Differences(dry.first, run->first) +
                            (dry.arena_bytes != run->arena_bytes ? " arena" : "");
      if (!d.empty()) {
        std::fprintf(stderr, "census: the dry and the executed %s step differ in:%s\n",
                     dry.precision.c_str(), d.c_str());
        return 1;
      }
      std::printf("census: the dry and the executed %s step agree exactly\n",
                  dry.precision.c_str());
    }
  }
  std::fputs(TextReport(f.shape, steps, f.assumptions).c_str(), stdout);
  if (!f.json.empty()) {
    std::ofstream out(f.json);
    out << JsonReport(f.shape, steps, f.assumptions);
    if (!out) {
      std::fprintf(stderr, "census: cannot write %s\n", f.json.c_str());
      return 1;
    }
  }
  if (!f.baseline.empty()) {
    if (absl::Status s = CheckBaseline(f.baseline, steps); !s.ok()) {
      std::fprintf(stderr, "census: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("census: within the baseline %s\n", f.baseline.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ringmaster::trainer::cuda

int main(int argc, char** argv) { return ringmaster::trainer::cuda::Main(argc, argv); }
