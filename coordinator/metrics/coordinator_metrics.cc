// Coordinator /metrics: a snapshot of the cluster turned into Prometheus metric families.
#include "coordinator/metrics/coordinator_metrics.h"

#ifdef RINGMASTER_HAVE_PROMETHEUS

#include <prometheus/client_metric.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "coordinator/cluster/proto_convert.h"

namespace ringmaster::coordinator {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

constexpr JobPhase kPhases[] = {JobPhase::kPending,    JobPhase::kRendezvous, JobPhase::kRunning,
                                JobPhase::kRestarting, JobPhase::kSucceeded,  JobPhase::kFailed,
                                JobPhase::kCancelled};

// "pending", "rendezvous", ...
std::string PhaseLabel(JobPhase p) { return absl::AsciiStrToLower(std::string(JobPhaseName(p))); }

std::string NodeStateLabel(v1::NodeState s) {
  switch (s) {
    case v1::NODE_STATE_READY:
      return "ready";
    case v1::NODE_STATE_BUSY:
      return "busy";
    case v1::NODE_STATE_LOST:
      return "lost";
    default:
      return "unknown";
  }
}

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void AddGauge(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void AddCounter(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  f.metric.push_back(std::move(m));
}

// A gauge family with one series per listed job.
template <typename Value>
MetricFamily PerJobGauge(const ClusterSnapshot& snap, std::string name, std::string help,
                         Value value) {
  MetricFamily f = Family(std::move(name), std::move(help), MetricType::Gauge);
  for (const ClusterSnapshot::Job& j : snap.jobs) {
    AddGauge(f, {{"ringmaster_job", j.status.job_id()}}, value(j));
  }
  return f;
}

}  // namespace

std::vector<MetricFamily> CoordinatorMetricFamilies(const ClusterSnapshot& snap) {
  std::vector<MetricFamily> out;

  MetricFamily jobs = Family("ringmaster_jobs", "Jobs per phase", MetricType::Gauge);
  for (JobPhase p : kPhases) {
    auto it = snap.jobs_per_phase.find(p);
    AddGauge(jobs, {{"phase", PhaseLabel(p)}}, it == snap.jobs_per_phase.end() ? 0 : it->second);
  }
  out.push_back(std::move(jobs));

  MetricFamily phase = Family("ringmaster_job_phase",
                              "1 for the job's current phase, 0 for the others", MetricType::Gauge);
  for (const ClusterSnapshot::Job& j : snap.jobs) {
    for (JobPhase p : kPhases) {
      AddGauge(phase,
               {{"name", j.status.name()},
                {"phase", PhaseLabel(p)},
                {"ringmaster_job", j.status.job_id()}},
               j.status.phase() == PhaseToProto(p) ? 1 : 0);
    }
  }
  out.push_back(std::move(phase));

  out.push_back(PerJobGauge(snap, "ringmaster_job_world_size",
                            "Ranks of the job's current generation (0 before the first launch)",
                            [](const auto& j) { return j.status.world_size(); }));
  out.push_back(PerJobGauge(snap, "ringmaster_job_generation",
                            "The job's generation (attempt number, from 0)",
                            [](const auto& j) { return j.status.generation(); }));
  MetricFamily restarts = Family("ringmaster_job_restarts_total",
                                 "Restarts the job has spent on failures", MetricType::Counter);
  for (const ClusterSnapshot::Job& j : snap.jobs) {
    AddCounter(restarts, {{"ringmaster_job", j.status.job_id()}}, j.status.restarts());
  }
  out.push_back(std::move(restarts));
  out.push_back(PerJobGauge(snap, "ringmaster_job_step", "Optimizer steps rank 0 has completed",
                            [](const auto& j) { return static_cast<double>(j.status.step()); }));
  out.push_back(
      PerJobGauge(snap, "ringmaster_job_total_steps", "Optimizer steps of the job (0: not known)",
                  [](const auto& j) { return static_cast<double>(j.status.total_steps()); }));
  out.push_back(PerJobGauge(
      snap, "ringmaster_job_committed_step", "Step of the newest committed checkpoint (0: none)",
      [](const auto& j) { return static_cast<double>(j.status.committed_step()); }));
  out.push_back(PerJobGauge(snap, "ringmaster_job_loss", "Training loss rank 0 last reported",
                            [](const auto& j) { return j.status.loss(); }));
  out.push_back(PerJobGauge(snap, "ringmaster_job_samples_per_second",
                            "Training throughput of all ranks together (0 unless running)",
                            [](const auto& j) { return j.status.samples_per_second(); }));

  MetricFamily last_rv =
      Family("ringmaster_job_rendezvous_seconds",
             "Length of the job's last rendezvous, from gathering nodes to launching the ranks",
             MetricType::Gauge);
  for (const ClusterSnapshot::Job& j : snap.jobs) {
    if (j.last_rendezvous) {
      AddGauge(last_rv, {{"ringmaster_job", j.status.job_id()}},
               absl::ToDoubleSeconds(*j.last_rendezvous));
    }
  }
  out.push_back(std::move(last_rv));

  MetricFamily rv = Family("ringmaster_rendezvous_seconds",
                           "Every rendezvous since the coordinator started, gathering to launch",
                           MetricType::Histogram);
  prometheus::Histogram histogram(
      prometheus::Histogram::BucketBoundaries{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800});
  for (absl::Duration d : snap.rendezvous) histogram.Observe(absl::ToDoubleSeconds(d));
  rv.metric.push_back(histogram.Collect());
  out.push_back(std::move(rv));

  out.push_back(PerJobGauge(
      snap, "ringmaster_job_stall_seconds",
      "Longest wait of ranks inside a collective that other ranks have not entered (0: no stall)",
      [](const auto& j) {
        return j.status.has_stall()
                   ? DurationFromProto(j.status.stall().waited()) / absl::Seconds(1)
                   : 0.0;
      }));
  MetricFamily missing = Family("ringmaster_job_stall_missing_rank",
                                "1 for each rank that holds a stalled job up", MetricType::Gauge);
  MetricFamily straggler =
      Family("ringmaster_job_straggler_seconds",
             "Straggler score: seconds per step the job waits for this rank (about 0: healthy)",
             MetricType::Gauge);
  for (const ClusterSnapshot::Job& j : snap.jobs) {
    for (uint32_t r : j.status.stall().missing_ranks()) {
      AddGauge(missing, {{"rank", absl::StrCat(r)}, {"ringmaster_job", j.status.job_id()}}, 1);
    }
    for (const v1::RankStraggler& s : j.status.stragglers()) {
      AddGauge(straggler, {{"rank", absl::StrCat(s.rank())}, {"ringmaster_job", j.status.job_id()}},
               s.seconds_per_step());
    }
  }
  out.push_back(std::move(missing));
  out.push_back(std::move(straggler));

  MetricFamily nodes = Family("ringmaster_nodes", "Nodes per state", MetricType::Gauge);
  std::map<std::string, int> per_state = {{"ready", 0}, {"busy", 0}, {"lost", 0}};
  for (const ClusterSnapshot::Node& n : snap.nodes) ++per_state[NodeStateLabel(n.state)];
  for (const auto& [state, count] : per_state) AddGauge(nodes, {{"state", state}}, count);
  out.push_back(std::move(nodes));
  MetricFamily age =
      Family("ringmaster_node_heartbeat_age_seconds",
             "Time since the node's agent last talked to the coordinator", MetricType::Gauge);
  MetricFamily throughput =
      Family("ringmaster_node_throughput_samples_per_second",
             "The node's measured trainer throughput (0: not measured)", MetricType::Gauge);
  for (const ClusterSnapshot::Node& n : snap.nodes) {
    AddGauge(age, {{"node", n.name}}, absl::ToDoubleSeconds(n.heartbeat_age));
    AddGauge(throughput, {{"node", n.name}}, n.samples_per_second);
  }
  out.push_back(std::move(age));
  out.push_back(std::move(throughput));

  MetricFamily start = Family("ringmaster_coordinator_start_time_seconds",
                              "Unix time at which the coordinator started", MetricType::Gauge);
  AddGauge(start, {}, absl::ToDoubleSeconds(snap.started_at - absl::UnixEpoch()));
  out.push_back(std::move(start));
  // Families without a series (no jobs, no stall) stay on the page as HELP and TYPE lines: the
  // page declares every metric the coordinator can export, so dashboards, alert rules and their
  // checks find names whose series exist only in some states.
  return out;
}

MetricFamily RefusedCallsFamily(const security::Refusals& refusals) {
  MetricFamily f = Family("ringmaster_coordinator_refused_calls_total",
                          "Control-plane calls the coordinator refused, by reason (a missing or "
                          "wrong token, a node secret, a stream in use, a registration)",
                          MetricType::Counter);
  for (security::Refusal r : security::kRefusals) {
    AddCounter(f, {{"reason", std::string(security::RefusalName(r))}},
               static_cast<double>(refusals.count(r)));
  }
  return f;
}

std::vector<MetricFamily> CoordinatorCollectable::Collect() const {
  std::vector<MetricFamily> out =
      CoordinatorMetricFamilies(cluster_.Snapshot(kEndedJobsInMetricsFor));
  out.push_back(RefusedCallsFamily(refusals_));
  return out;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsServer(const std::string& listen,
                                                                  Cluster& cluster) {
  return trainer::ServeCollectable(listen, std::make_shared<CoordinatorCollectable>(cluster));
}

}  // namespace ringmaster::coordinator

#else  // no prometheus-cpp

namespace ringmaster::coordinator {

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetricsServer(const std::string& listen,
                                                                  Cluster&) {
  return absl::UnimplementedError("metrics on " + listen +
                                  " requested, but this build has no prometheus-cpp");
}

}  // namespace ringmaster::coordinator

#endif
