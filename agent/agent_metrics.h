// What the agent shows on /metrics: its own state (connected, ranks by state, trainer starts,
// measured throughput), its GPUs (NVML, where present) and the live figures of every rank it runs,
// read from the ranks' status files at scrape time and labelled ringmaster_job (the job id) and
// rank. The agent's loop publishes a snapshot after each report; the HTTP thread reads the latest
// one. Catalogue: docs/metrics.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/gpu_monitor.h"
#include "agent/rank_supervisor.h"
#include "common/metrics_server.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::agent {

struct AgentSnapshot {
  bool connected = false;
  std::map<std::string, int> ranks_by_state;  // "running", "exited", ... (every state listed)
  uint64_t rank_starts = 0;
  std::vector<RankSupervisor::StatusSource> sources;
};

// The metric label value of a rank process state ("running", "failed_to_start", ...).
std::string RankStateLabel(v1::RankProcessState state);

// Counts `reports` by state, every state present (zeros included).
std::map<std::string, int> CountRankStates(const std::vector<v1::RankProgress>& reports);

class AgentMetrics {
 public:
  // `gpus` (optional, must outlive this) is read at scrape time.
  explicit AgentMetrics(double throughput_samples_per_second, GpuMonitor* gpus = nullptr)
      : throughput_(throughput_samples_per_second), gpus_(gpus) {}

  void Publish(AgentSnapshot s) ABSL_LOCKS_EXCLUDED(mu_);
  void SetConnected(bool connected) ABSL_LOCKS_EXCLUDED(mu_);
  AgentSnapshot Latest() const ABSL_LOCKS_EXCLUDED(mu_);
  double throughput() const { return throughput_; }
  GpuMonitor* gpus() const { return gpus_; }

 private:
  const double throughput_;
  GpuMonitor* const gpus_;
  mutable absl::Mutex mu_;
  AgentSnapshot latest_ ABSL_GUARDED_BY(mu_);
};

// Serves `metrics` (which must outlive the server) on `listen` ("HOST:PORT"; port 0 picks a
// free one) with the constant label node=`node_name` on the agent's own series. Unimplemented
// without prometheus-cpp; Unavailable when the address cannot be bound.
absl::StatusOr<std::unique_ptr<trainer::MetricsServer>> ServeAgentMetrics(
    const std::string& listen, const AgentMetrics* metrics, const std::string& node_name);

}  // namespace ringmaster::agent
