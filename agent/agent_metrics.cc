#include "agent/agent_metrics.h"

namespace ringmaster::agent {

std::string RankStateLabel(v1::RankProcessState state) {
  switch (state) {
    case v1::RANK_PROCESS_STATE_STARTING:
      return "starting";
    case v1::RANK_PROCESS_STATE_RUNNING:
      return "running";
    case v1::RANK_PROCESS_STATE_EXITED:
      return "exited";
    case v1::RANK_PROCESS_STATE_SIGNALED:
      return "signaled";
    case v1::RANK_PROCESS_STATE_FAILED_TO_START:
      return "failed_to_start";
    case v1::RANK_PROCESS_STATE_STOPPED:
      return "stopped";
    default:
      return "unknown";
  }
}

std::map<std::string, int> CountRankStates(const std::vector<v1::RankProgress>& reports) {
  std::map<std::string, int> out;
  for (auto s : {v1::RANK_PROCESS_STATE_STARTING, v1::RANK_PROCESS_STATE_RUNNING,
                 v1::RANK_PROCESS_STATE_EXITED, v1::RANK_PROCESS_STATE_SIGNALED,
                 v1::RANK_PROCESS_STATE_FAILED_TO_START, v1::RANK_PROCESS_STATE_STOPPED}) {
    out[RankStateLabel(s)] = 0;
  }
  for (const v1::RankProgress& r : reports) ++out[RankStateLabel(r.state())];
  return out;
}

void AgentMetrics::Publish(AgentSnapshot s) {
  absl::MutexLock lock(&mu_);
  latest_ = std::move(s);
}

void AgentMetrics::SetConnected(bool connected) {
  absl::MutexLock lock(&mu_);
  latest_.connected = connected;
}

AgentSnapshot AgentMetrics::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

#ifndef RINGMASTER_HAVE_PROMETHEUS
absl::StatusOr<std::unique_ptr<trainer::MetricsServer>> ServeAgentMetrics(const std::string& listen,
                                                                          const AgentMetrics*,
                                                                          const std::string&) {
  return absl::UnimplementedError("metrics on " + listen +
                                  " requested, but this build has no prometheus-cpp");
}
#endif

}  // namespace ringmaster::agent
