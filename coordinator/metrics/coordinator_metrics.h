// The coordinator's /metrics (docs/metrics.md, "Coordinator"): jobs per phase, per-job progress,
// rendezvous lengths, stalls and straggler scores, nodes and their heartbeats. Nothing is updated
// in the background: every scrape takes one Cluster::Snapshot and turns it into metric families,
// so the figures of a scrape are consistent with each other and with GetJob.
//
// Built with prometheus-cpp when it is installed; without it StartMetricsServer refuses with a
// clear error (like the trainer's --metrics-port).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics_server.h"
#include "coordinator/cluster/cluster.h"
#include "security/refusals.h"

#ifdef RINGMASTER_HAVE_PROMETHEUS
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#endif

namespace ringmaster::coordinator {

// Jobs that ended stay in the per-job series this long after their last update.
inline constexpr absl::Duration kEndedJobsInMetricsFor = absl::Hours(1);

#ifdef RINGMASTER_HAVE_PROMETHEUS
// The metric families of one snapshot.
std::vector<prometheus::MetricFamily> CoordinatorMetricFamilies(const ClusterSnapshot& snapshot);

// ringmaster_coordinator_refused_calls_total{reason}: every reason, 0 included.
prometheus::MetricFamily RefusedCallsFamily(const security::Refusals& refusals);

// A Collectable over a live cluster: Collect() = CoordinatorMetricFamilies(cluster.Snapshot())
// plus the refused calls. Thread-safe (the cluster and the refusals are). Both must outlive it.
class CoordinatorCollectable final : public prometheus::Collectable {
 public:
  explicit CoordinatorCollectable(Cluster& cluster,
                                  const security::Refusals& refusals = security::ProcessRefusals())
      : cluster_(cluster), refusals_(refusals) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Cluster& cluster_;
  const security::Refusals& refusals_;
};
#endif

using trainer::MetricsServer;  // the HTTP server behind /metrics (common/metrics_server.h)

// Serves /metrics on `listen` ("HOST:PORT"; port 0 picks a free one, and the log names it).
// Unimplemented when this build has no prometheus-cpp; Unavailable when the address cannot be
// bound. `cluster` must outlive the server. Refused calls come from security::ProcessRefusals().
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsServer(const std::string& listen,
                                                                  Cluster& cluster);

}  // namespace ringmaster::coordinator
