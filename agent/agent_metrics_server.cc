// The prometheus-cpp half of agent_metrics.h (built only with prometheus-cpp).
#include <prometheus/collectable.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "common/figures_exposition.h"

namespace ringmaster::agent {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Gauge(const std::string& name, const std::string& help, const std::string& node,
                   double value, MetricType type = MetricType::Gauge) {
  ClientMetric m;
  m.label.push_back({"node", node});
  (type == MetricType::Counter ? m.counter.value : m.gauge.value) = value;
  return MetricFamily{name, help, type, {m}};
}

class AgentCollectable : public prometheus::Collectable {
 public:
  AgentCollectable(const AgentMetrics* metrics, std::string node)
      : metrics_(metrics), node_(std::move(node)) {}

  std::vector<MetricFamily> Collect() const override {
    const AgentSnapshot s = metrics_->Latest();
    std::vector<MetricFamily> out;
    out.push_back(Gauge("ringmaster_agent_connected",
                        "1 while the agent's heartbeat stream to the coordinator is up", node_,
                        s.connected ? 1 : 0));
    out.push_back(Gauge("ringmaster_agent_rank_starts_total",
                        "Trainer processes this agent has started (first starts and restarts)",
                        node_, static_cast<double>(s.rank_starts), MetricType::Counter));
    out.push_back(Gauge("ringmaster_agent_throughput_samples_per_second",
                        "This node's measured trainer throughput (0: not measured)", node_,
                        metrics_->throughput()));
    MetricFamily ranks{
        "ringmaster_agent_ranks", "Local trainer ranks by process state", MetricType::Gauge, {}};
    for (const auto& [state, n] : s.ranks_by_state) {
      ClientMetric m;
      m.label = {{"node", node_}, {"state", state}};
      m.gauge.value = n;
      ranks.metric.push_back(std::move(m));
    }
    if (!ranks.metric.empty()) out.push_back(std::move(ranks));
    AddGpuFamilies(&out);

    // The ranks' own figures, fresh from their status files.
    std::vector<trainer::LabeledFigures> figures;
    for (const RankSupervisor::StatusSource& src : s.sources) {
      absl::StatusOr<trainer::RankFigures> f = trainer::ReadRankStatusFile(src.path);
      if (!f.ok()) continue;  // not written yet: the rank is still starting
      figures.push_back(
          {{{"ringmaster_job", src.job_id}, {"rank", absl::StrCat(src.global_rank)}}, *f});
    }
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (MetricFamily& f : trainer::TrainerFamilies(figures, now)) out.push_back(std::move(f));
    return out;
  }

 private:
  // Declared even without NVML (HELP and TYPE only), so dashboards find the names everywhere.
  void AddGpuFamilies(std::vector<MetricFamily>* out) const {
    MetricFamily used{
        "ringmaster_gpu_memory_used_bytes", "GPU memory in use (NVML)", MetricType::Gauge, {}};
    MetricFamily total{"ringmaster_gpu_memory_total_bytes",
                       "GPU memory on the device (NVML)",
                       MetricType::Gauge,
                       {}};
    MetricFamily util{"ringmaster_gpu_utilization_ratio",
                      "Share of the last sample period in which a kernel ran (NVML)",
                      MetricType::Gauge,
                      {}};
    if (metrics_->gpus() != nullptr) {
      for (const GpuReading& g : metrics_->gpus()->Read()) {
        ClientMetric m;
        m.label = {{"node", node_}, {"gpu", absl::StrCat(g.index)}, {"UUID", g.uuid}};
        m.gauge.value = static_cast<double>(g.memory_used_bytes);
        used.metric.push_back(m);
        m.gauge.value = static_cast<double>(g.memory_total_bytes);
        total.metric.push_back(m);
        m.gauge.value = g.utilization;
        util.metric.push_back(std::move(m));
      }
    }
    out->push_back(std::move(used));
    out->push_back(std::move(total));
    out->push_back(std::move(util));
  }

  const AgentMetrics* metrics_;
  std::string node_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<trainer::MetricsServer>> ServeAgentMetrics(
    const std::string& listen, const AgentMetrics* metrics, const std::string& node_name) {
  return trainer::ServeCollectable(listen, std::make_shared<AgentCollectable>(metrics, node_name));
}

}  // namespace ringmaster::agent
