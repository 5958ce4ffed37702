#include "trainer/train/throughput_probe.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "jobspec/bert_config.h"
#include "trainer/model/bert_model.h"
#include "trainer/model/bert_params.h"
#include "trainer/optim/adamw.h"
#include "trainer/train/slowdown.h"

namespace ringmaster::trainer {

std::string ProbeResult::ToJson() const {
  return nlohmann::json{{"samples_per_second", samples_per_second},
                        {"steps", steps},
                        {"seconds", seconds},
                        {"device", device},
                        {"model", model},
                        {"threads", threads}}
      .dump();
}

absl::StatusOr<ProbeResult> ProbeThroughput(const ProbeOptions& options) {
  Slowdown slowdown(options.slowdown);
  // Small enough to take a second or two on one core, large enough that GEMMs dominate.
  BertConfig c;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  c.vocab_size = 4096;
  c.max_position_embeddings = 128;
  c.num_labels = 2;
  const int batch = 8, seq = 64;
  const ParamLayout layout = MakeBertParamLayout(c);
  std::vector<float> params(layout.total), grads(layout.total);
  InitBertParams(c, layout, 1, params.data());
  BertModel<float> model(c, layout);
  AdamW opt(layout, {});
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(5, c.vocab_size - 1);
  std::vector<int32_t> ids(static_cast<size_t>(batch) * seq), types(ids.size(), 0);
  std::vector<float> mask(ids.size(), 1.0f), labels(batch);
  for (auto& x : ids) x = tok(rng);
  for (int b = 0; b < batch; ++b) labels[b] = static_cast<float>(b % 2);
  const BertInputs in{batch, seq, ids.data(), types.data(), mask.data(), labels.data()};

  auto step = [&](uint64_t i) {
    slowdown.Begin();
    std::fill(grads.begin(), grads.end(), 0.0f);
    const float loss = model.Forward(params.data(), in, true, i);
    model.Backward(params.data(), grads.data(), 1.0f);
    ClipGradNorm(grads.data(), grads.size(), 1.0);
    opt.Step(params.data(), grads.data(), 1e-4);
    slowdown.End();
    return loss;
  };
  if (!std::isfinite(step(0))) return absl::InternalError("probe: the loss is not finite");
  // The median step: robust to a neighbour process taking the CPU for a moment.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::vector<double> times;
  double seconds = 0;
  while (static_cast<int>(times.size()) < options.min_steps || seconds < options.min_seconds) {
    const auto s0 = Clock::now();
    step(times.size() + 1);
    const auto s1 = Clock::now();
    times.push_back(std::chrono::duration<double>(s1 - s0).count());
    seconds = std::chrono::duration<double>(s1 - t0).count();
  }
  std::sort(times.begin(), times.end());
  ProbeResult r;
  r.steps = static_cast<int>(times.size());
  r.seconds = seconds;
  r.samples_per_second = batch / times[times.size() / 2];
  r.device = "cpu";
  r.model =
      absl::StrCat("bert-h", c.hidden_size, "-l", c.num_hidden_layers, "-s", seq, "-b", batch);
  r.threads = omp_get_max_threads();
  return r;
}

}  // namespace ringmaster::trainer
