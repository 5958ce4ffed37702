// The prometheus-cpp implementation of TrainerMetrics (built only with prometheus-cpp).
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "trainer/metrics/trainer_metrics.h"

namespace ringmaster::trainer {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

class PrometheusMetrics : public TrainerMetrics {
 public:
  PrometheusMetrics(std::unique_ptr<prometheus::Exposer> exposer,
                    const std::map<std::string, std::string>& labels)
      : exposer_(std::move(exposer)),
        registry_(std::make_shared<prometheus::Registry>()),
        samples_(BuildCounter()
                     .Name("ringmaster_trainer_samples_total")
                     .Help("Training samples this rank has processed")
                     .Labels(labels)
                     .Register(*registry_)
                     .Add({})),
        tokens_(BuildCounter()
                    .Name("ringmaster_trainer_tokens_total")
                    .Help("Non-padding training tokens this rank has processed")
                    .Labels(labels)
                    .Register(*registry_)
                    .Add({})),
        steps_(BuildCounter()
                   .Name("ringmaster_trainer_steps_total")
                   .Help("Optimizer steps completed by this process")
                   .Labels(labels)
                   .Register(*registry_)
                   .Add({})),
        step_seconds_(BuildHistogram()
                          .Name("ringmaster_trainer_step_seconds")
                          .Help("Wall time of one optimizer step")
                          .Labels(labels)
                          .Register(*registry_)
                          .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05,
                                                                           0.1, 0.25, 0.5, 1, 2.5,
                                                                           5, 10, 25, 60})),
        data_wait_(BuildCounter()
                       .Name("ringmaster_trainer_data_wait_seconds_total")
                       .Help("Time the step loop waited for batches")
                       .Labels(labels)
                       .Register(*registry_)
                       .Add({})),
        loss_(Gauge("ringmaster_trainer_loss", "Training loss of the last step", labels)),
        lr_(Gauge("ringmaster_trainer_learning_rate", "Learning rate of the last step", labels)),
        grad_norm_(Gauge("ringmaster_trainer_grad_norm",
                         "Global gradient L2 norm of the last step, before clipping", labels)),
        step_(Gauge("ringmaster_trainer_step", "Optimizer steps completed", labels)),
        total_steps_(
            Gauge("ringmaster_trainer_steps_planned", "Optimizer steps of the job", labels)),
        last_step_(Gauge("ringmaster_trainer_last_step_timestamp_seconds",
                         "Unix time at which the last step finished", labels)),
        world_size_(Gauge("ringmaster_trainer_world_size", "Ranks in the job", labels)),
        eval_loss_(
            Gauge("ringmaster_trainer_eval_loss", "Loss on the eval set, last evaluation", labels)),
        eval_accuracy_(Gauge("ringmaster_trainer_eval_accuracy",
                             "Accuracy on the eval set, last evaluation (ratio)", labels)),
        checkpoint_seconds_(
            BuildHistogram()
                .Name("ringmaster_trainer_checkpoint_seconds")
                .Help("Wall time of writing one checkpoint")
                .Labels(labels)
                .Register(*registry_)
                .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30,
                                                                 60, 300})),
        checkpoint_bytes_(BuildCounter()
                              .Name("ringmaster_trainer_checkpoint_bytes_total")
                              .Help("Bytes of checkpoint shards this rank has written")
                              .Labels(labels)
                              .Register(*registry_)
                              .Add({})),
        state_bytes_(BuildGauge()
                         .Name("ringmaster_trainer_state_bytes")
                         .Help("Parameter, gradient and optimizer memory of this rank")
                         .Labels(labels)
                         .Register(*registry_)),
        comm_bytes_(BuildCounter()
                        .Name("ringmaster_trainer_comm_bytes_total")
                        .Help("Bytes this rank sent in collectives, by operation; wire=raw is "
                              "what fp32 would have taken, wire=compressed what was sent")
                        .Labels(labels)
                        .Register(*registry_)) {
    exposer_->RegisterCollectable(registry_);
  }

  int port() const {
    const std::vector<int> ports = exposer_->GetListeningPorts();
    return ports.empty() ? 0 : ports[0];
  }

  void OnStart(int world_size, int64_t total_steps) override {
    world_size_.Set(world_size);
    total_steps_.Set(static_cast<double>(total_steps));
  }

  void OnStep(const StepFigures& f, const CommTotals& comm) override {
    samples_.Increment(static_cast<double>(f.samples));
    tokens_.Increment(static_cast<double>(f.tokens));
    steps_.Increment();
    step_seconds_.Observe(f.seconds);
    data_wait_.Increment(f.data_wait_seconds);
    loss_.Set(f.loss);
    lr_.Set(f.learning_rate);
    grad_norm_.Set(f.grad_norm);
    step_.Set(static_cast<double>(f.step));
    last_step_.Set(f.unix_time);
    Advance(comm_bytes_.Add({{"op", "gather"}, {"wire", "raw"}}), comm.gather_bytes, &gather_);
    Advance(comm_bytes_.Add({{"op", "gather"}, {"wire", "compressed"}}), comm.gather_bytes,
            &gather_wire_);
    Advance(comm_bytes_.Add({{"op", "reduce"}, {"wire", "raw"}}), comm.reduce_raw_bytes,
            &reduce_raw_);
    Advance(comm_bytes_.Add({{"op", "reduce"}, {"wire", "compressed"}}), comm.reduce_wire_bytes,
            &reduce_wire_);
  }

  void OnEval(double loss, double accuracy) override {
    eval_loss_.Set(loss);
    eval_accuracy_.Set(accuracy);
  }

  void OnCheckpoint(double seconds, uint64_t bytes) override {
    checkpoint_seconds_.Observe(seconds);
    checkpoint_bytes_.Increment(static_cast<double>(bytes));
  }

  void OnMemory(uint64_t persistent, uint64_t peak_transient) override {
    state_bytes_.Add({{"kind", "persistent"}}).Set(static_cast<double>(persistent));
    state_bytes_.Add({{"kind", "peak_transient"}}).Set(static_cast<double>(peak_transient));
  }

 private:
  prometheus::Gauge& Gauge(const std::string& name, const std::string& help,
                           const std::map<std::string, std::string>& labels) {
    return BuildGauge().Name(name).Help(help).Labels(labels).Register(*registry_).Add({});
  }
  // Counters take increments; the engine keeps totals.
  static void Advance(prometheus::Counter& c, uint64_t total, uint64_t* seen) {
    if (total > *seen) c.Increment(static_cast<double>(total - *seen));
    *seen = total;
  }

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter &samples_, &tokens_, &steps_;
  prometheus::Histogram& step_seconds_;
  prometheus::Counter& data_wait_;
  prometheus::Gauge &loss_, &lr_, &grad_norm_, &step_, &total_steps_, &last_step_, &world_size_,
      &eval_loss_, &eval_accuracy_;
  prometheus::Histogram& checkpoint_seconds_;
  prometheus::Counter& checkpoint_bytes_;
  prometheus::Family<prometheus::Gauge>& state_bytes_;
  prometheus::Family<prometheus::Counter>& comm_bytes_;
  uint64_t gather_ = 0, gather_wire_ = 0, reduce_raw_ = 0, reduce_wire_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrainerMetrics>> MakePrometheusMetrics(
    const std::string& listen, const std::map<std::string, std::string>& labels) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
    auto m = std::make_unique<PrometheusMetrics>(std::move(exposer), labels);
    const std::string host = listen.substr(0, listen.rfind(':'));
    LogInfo(absl::StrCat("metrics on http://", host, ":", m->port(), "/metrics"));
    return std::unique_ptr<TrainerMetrics>(std::move(m));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
}

}  // namespace ringmaster::trainer
