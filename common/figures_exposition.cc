#include "common/figures_exposition.h"

#include <functional>
#include <limits>

namespace ringmaster::trainer {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<std::pair<std::string, std::string>>;

ClientMetric WithLabels(const Labels& base, const Labels& extra) {
  ClientMetric m;
  for (const auto& [k, v] : base) m.label.push_back({k, v});
  for (const auto& [k, v] : extra) m.label.push_back({k, v});
  return m;
}

// Collects the series of one family across ranks; families without a series are dropped.
class Families {
 public:
  explicit Families(const std::vector<LabeledFigures>& ranks) : ranks_(ranks) {}

  // `value` returns false to leave a rank's series out.
  void Scalar(const std::string& name, const std::string& help, MetricType type,
              const std::function<bool(const RankFigures&, double*)>& value) {
    MetricFamily f{name, help, type, {}};
    for (const LabeledFigures& r : ranks_) {
      double v = 0;
      if (!value(r.figures, &v)) continue;
      ClientMetric m = WithLabels(r.labels, {});
      (type == MetricType::Counter ? m.counter.value : m.gauge.value) = v;
      f.metric.push_back(std::move(m));
    }
    Push(std::move(f));
  }

  // Any number of series per rank, each with its own extra labels.
  void Multi(
      const std::string& name, const std::string& help, MetricType type,
      const std::function<std::vector<std::pair<Labels, double>>(const RankFigures&)>& series) {
    MetricFamily f{name, help, type, {}};
    for (const LabeledFigures& r : ranks_) {
      for (auto& [extra, v] : series(r.figures)) {
        ClientMetric m = WithLabels(r.labels, extra);
        (type == MetricType::Counter ? m.counter.value : m.gauge.value) = v;
        f.metric.push_back(std::move(m));
      }
    }
    Push(std::move(f));
  }

  template <size_t N>
  void Histogram(const std::string& name, const std::string& help,
                 const std::array<double, N>& bounds,
                 const std::function<const HistogramFigures&(const RankFigures&)>& get) {
    MetricFamily f{name, help, MetricType::Histogram, {}};
    for (const LabeledFigures& r : ranks_) {
      const HistogramFigures& h = get(r.figures);
      ClientMetric m = WithLabels(r.labels, {});
      uint64_t cumulative = 0;
      for (size_t i = 0; i < N; ++i) {
        cumulative += i < h.counts.size() ? h.counts[i] : 0;
        m.histogram.bucket.push_back({cumulative, bounds[i]});
      }
      m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
      m.histogram.sample_count = h.count;
      m.histogram.sample_sum = h.sum;
      f.metric.push_back(std::move(m));
    }
    Push(std::move(f));
  }

  std::vector<MetricFamily> Take() { return std::move(out_); }

 private:
  void Push(MetricFamily f) {
    if (!f.metric.empty()) out_.push_back(std::move(f));
  }
  const std::vector<LabeledFigures>& ranks_;
  std::vector<MetricFamily> out_;
};

bool Stepped(const RankFigures& f) { return f.steps_total > 0; }

}  // namespace

std::vector<MetricFamily> TrainerFamilies(const std::vector<LabeledFigures>& ranks,
                                          double now_unix) {
  Families fam(ranks);
  using T = MetricType;
  auto always = [](double x, double* v) {
    *v = x;
    return true;
  };
  fam.Scalar("ringmaster_trainer_samples_total", "Training samples this rank has processed",
             T::Counter,
             [&](const RankFigures& f, double* v) { return always(f.samples_total, v); });
  fam.Scalar("ringmaster_trainer_tokens_total",
             "Non-padding training tokens this rank has processed", T::Counter,
             [&](const RankFigures& f, double* v) { return always(f.tokens_total, v); });
  fam.Scalar("ringmaster_trainer_steps_total", "Optimizer steps completed by this process",
             T::Counter, [&](const RankFigures& f, double* v) { return always(f.steps_total, v); });
  fam.Histogram("ringmaster_trainer_step_seconds", "Wall time of one optimizer step",
                kStepSecondsBounds,
                [](const RankFigures& f) -> const HistogramFigures& { return f.step_seconds; });
  fam.Scalar("ringmaster_trainer_data_wait_seconds_total", "Time the step loop waited for batches",
             T::Counter,
             [&](const RankFigures& f, double* v) { return always(f.data_wait_seconds, v); });
  auto after_step = [](double x, const RankFigures& f, double* v) {
    *v = x;
    return Stepped(f);
  };
  fam.Scalar("ringmaster_trainer_loss", "Training loss of the last step", T::Gauge,
             [&](const RankFigures& f, double* v) { return after_step(f.loss, f, v); });
  fam.Scalar("ringmaster_trainer_learning_rate", "Learning rate of the last step", T::Gauge,
             [&](const RankFigures& f, double* v) { return after_step(f.learning_rate, f, v); });
  fam.Scalar("ringmaster_trainer_grad_norm",
             "Global gradient L2 norm of the last step, before clipping", T::Gauge,
             [&](const RankFigures& f, double* v) { return after_step(f.grad_norm, f, v); });
  fam.Scalar("ringmaster_trainer_step", "Optimizer steps completed", T::Gauge,
             [&](const RankFigures& f, double* v) { return always(f.step, v); });
  fam.Scalar("ringmaster_trainer_steps_planned", "Optimizer steps of the job", T::Gauge,
             [&](const RankFigures& f, double* v) { return always(f.steps_planned, v); });
  fam.Scalar("ringmaster_trainer_last_step_timestamp_seconds",
             "Unix time at which the last step finished", T::Gauge,
             [&](const RankFigures& f, double* v) { return after_step(f.last_step_unix, f, v); });
  fam.Scalar("ringmaster_trainer_world_size", "Ranks in the job", T::Gauge,
             [&](const RankFigures& f, double* v) { return always(f.world_size, v); });
  fam.Scalar("ringmaster_trainer_eval_loss", "Loss on the eval set, last evaluation", T::Gauge,
             [](const RankFigures& f, double* v) {
               *v = f.eval_loss;
               return f.has_eval;
             });
  fam.Scalar("ringmaster_trainer_eval_accuracy",
             "Accuracy on the eval set, last evaluation (ratio)", T::Gauge,
             [](const RankFigures& f, double* v) {
               *v = f.eval_accuracy;
               return f.has_eval;
             });
  fam.Histogram("ringmaster_trainer_checkpoint_seconds", "Wall time of writing one checkpoint",
                kCheckpointSecondsBounds, [](const RankFigures& f) -> const HistogramFigures& {
                  return f.checkpoint_seconds;
                });
  fam.Scalar("ringmaster_trainer_checkpoint_bytes_total",
             "Bytes of checkpoint shards this rank has written", T::Counter,
             [&](const RankFigures& f, double* v) { return always(f.checkpoint_bytes_total, v); });
  fam.Multi(
      "ringmaster_trainer_state_bytes", "Parameter, gradient and optimizer memory of this rank",
      T::Gauge, [](const RankFigures& f) {
        std::vector<std::pair<Labels, double>> out;
        if (!f.has_memory) return out;
        out.push_back({{{"kind", "persistent"}}, static_cast<double>(f.state_persistent_bytes)});
        out.push_back(
            {{{"kind", "peak_transient"}}, static_cast<double>(f.state_peak_transient_bytes)});
        return out;
      });
  fam.Scalar("ringmaster_trainer_skipped_steps_total",
             "Steps whose update was skipped because fp16 gradients overflowed (the loss scale "
             "was halved)",
             T::Counter,
             [&](const RankFigures& f, double* v) { return always(f.skipped_steps_total, v); });
  fam.Scalar("ringmaster_trainer_loss_scale", "fp16 dynamic loss scale of the last step", T::Gauge,
             [](const RankFigures& f, double* v) {
               *v = f.loss_scale;
               return f.loss_scale > 0;
             });
  fam.Multi("ringmaster_trainer_gpu_memory_bytes",
            "Device memory of this rank's engine: allocated now, peak allocated, and the "
            "activation arena (part of allocated)",
            T::Gauge, [](const RankFigures& f) {
              std::vector<std::pair<Labels, double>> out;
              if (!f.has_device) return out;
              auto d = [](uint64_t b) { return static_cast<double>(b); };
              out.push_back({{{"kind", "allocated"}}, d(f.device.allocated_bytes)});
              out.push_back({{{"kind", "peak"}}, d(f.device.peak_allocated_bytes)});
              out.push_back({{{"kind", "arena"}}, d(f.device.arena_bytes)});
              return out;
            });
  fam.Scalar("ringmaster_trainer_gpu_step_seconds",
             "GPU time of the last step (CUDA events on the engine's stream)", T::Gauge,
             [](const RankFigures& f, double* v) {
               *v = f.device.step_seconds;
               return f.has_device;
             });
  fam.Scalar("ringmaster_trainer_gpu_busy_seconds_total",
             "GPU time of all steps; its rate is the share of wall time the GPU computed",
             T::Counter, [](const RankFigures& f, double* v) {
               *v = f.device.busy_seconds_total;
               return f.has_device;
             });
  fam.Scalar("ringmaster_trainer_gpu_comm_seconds",
             "GPU time of the last step spent in collectives, on the stream each runs on (part of "
             "it overlaps compute: ringmaster_trainer_gpu_exposed_comm_seconds is the part that "
             "does not)",
             T::Gauge, [](const RankFigures& f, double* v) {
               *v = f.device.comm_seconds;
               return f.has_device;
             });
  fam.Scalar("ringmaster_trainer_gpu_comm_seconds_total",
             "GPU time of all steps spent in collectives, on the stream each runs on", T::Counter,
             [](const RankFigures& f, double* v) {
               *v = f.device.comm_seconds_total;
               return f.has_device;
             });
  fam.Scalar("ringmaster_trainer_gpu_exposed_comm_seconds",
             "Exposed communication of the last step: GPU time the compute stream waited for the "
             "communication stream or ran collectives itself (CUDA events on the compute stream)",
             T::Gauge, [](const RankFigures& f, double* v) {
               *v = f.device.exposed_comm_seconds;
               return f.has_device;
             });
  fam.Scalar("ringmaster_trainer_gpu_exposed_comm_seconds_total",
             "Exposed communication of all steps (GPU time the compute stream did not compute "
             "for communication)",
             T::Counter, [](const RankFigures& f, double* v) {
               *v = f.device.exposed_comm_seconds_total;
               return f.has_device;
             });
  // Raw gather bytes equal the wire bytes: parameters travel uncompressed.
  fam.Multi("ringmaster_trainer_comm_bytes_total",
            "Bytes this rank sent in collectives, by operation; wire=raw is what fp32 would have "
            "taken, wire=compressed what was sent",
            T::Counter, [](const RankFigures& f) {
              auto d = [](uint64_t b) { return static_cast<double>(b); };
              return std::vector<std::pair<Labels, double>>{
                  {{{"op", "gather"}, {"wire", "raw"}}, d(f.gather_bytes)},
                  {{{"op", "gather"}, {"wire", "compressed"}}, d(f.gather_bytes)},
                  {{{"op", "reduce"}, {"wire", "raw"}}, d(f.reduce_raw_bytes)},
                  {{{"op", "reduce"}, {"wire", "compressed"}}, d(f.reduce_wire_bytes)}};
            });
  fam.Multi("ringmaster_trainer_comm_seconds_total",
            "Time this rank spent inside collectives, by collective", T::Counter,
            [](const RankFigures& f) {
              std::vector<std::pair<Labels, double>> out;
              for (int i = 0; i < kNumCollectives; ++i) {
                out.push_back({{{"collective", CollectiveName(static_cast<Collective>(i))}},
                               f.comm_seconds[i]});
              }
              return out;
            });
  fam.Scalar("ringmaster_trainer_collective_seq",
             "Number of the last collective this rank entered (1-based; equal numbers are the "
             "same collective on every rank)",
             T::Gauge, [&](const RankFigures& f, double* v) {
               return always(static_cast<double>(f.collective_seq), v);
             });
  fam.Scalar("ringmaster_trainer_in_collective", "1 while this rank is inside a collective",
             T::Gauge,
             [&](const RankFigures& f, double* v) { return always(f.in_collective ? 1 : 0, v); });
  fam.Scalar("ringmaster_trainer_collective_wait_seconds",
             "How long this rank has been inside its current collective (0 outside one)", T::Gauge,
             [&](const RankFigures& f, double* v) {
               const double w = now_unix - f.collective_entered_unix;
               return always(f.in_collective && w > 0 ? w : 0, v);
             });
  return fam.Take();
}

}  // namespace ringmaster::trainer
