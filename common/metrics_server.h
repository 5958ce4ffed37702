// An HTTP /metrics endpoint, shared by the trainer, the agent and the coordinator: one
// implementation of serving a prometheus::Collectable (ServeCollectable), and a standalone
// trainer's use of it, the figures of its RankStatus (rendered by figures_exposition). Under an
// agent the trainer serves nothing itself: the agent reads the status file and serves every rank
// it runs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rank_status.h"

#ifdef RINGMASTER_HAVE_PROMETHEUS
#include <prometheus/collectable.h>
#endif

namespace ringmaster::trainer {

// The HTTP server behind /metrics; stops serving when destroyed.
class MetricsServer {
 public:
  virtual ~MetricsServer() = default;
  virtual int port() const = 0;
};

#ifdef RINGMASTER_HAVE_PROMETHEUS
// Serves `collectable` on `listen` ("HOST:PORT"; port 0 picks a free one, and the log names it).
// Unavailable, naming the address, when it cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeCollectable(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> collectable);
#endif

// Serves `status` (which must outlive the server) on `listen` ("HOST:PORT"; port 0 picks a free
// one) with constant `labels` on every series. Unimplemented when this build has no
// prometheus-cpp; Unavailable when the address cannot be bound.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeRankMetrics(
    const std::string& listen, const RankStatus* status,
    std::vector<std::pair<std::string, std::string>> labels);

}  // namespace ringmaster::trainer
