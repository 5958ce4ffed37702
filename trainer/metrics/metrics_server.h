// A standalone trainer's /metrics: serves the figures of its RankStatus (rendered by
// figures_exposition) over HTTP. Under an agent the trainer serves nothing itself: the agent
// reads the status file and serves every rank it runs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/metrics/rank_status.h"

namespace ringmaster::trainer {

class MetricsServer {
 public:
  virtual ~MetricsServer() = default;
  virtual int port() const = 0;
};

// Serves `status` (which must outlive the server) on `listen` ("HOST:PORT"; port 0 picks a free
// one) with constant `labels` on every series. Unimplemented when this build has no
// prometheus-cpp; Unavailable when the address cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeRankMetrics(
    const std::string& listen, const RankStatus* status,
    std::vector<std::pair<std::string, std::string>> labels);

}  // namespace ringmaster::trainer
