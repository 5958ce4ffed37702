#include "cli/job_format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log_escape.h"
#include "common/progress.h"
#include "common/rank_list.h"
#include "google/protobuf/util/time_util.h"

namespace ringmaster::cli {
namespace {

std::string NodeStateName(v1::NodeState s) {
  switch (s) {
    case v1::NODE_STATE_READY:
      return "Ready";
    case v1::NODE_STATE_BUSY:
      return "Busy";
    case v1::NODE_STATE_LOST:
      return "Lost";
    default:
      return "Unknown";
  }
}

std::string FailureName(v1::FailureKind k) {
  switch (k) {
    case v1::FAILURE_KIND_RANK_EXITED:
      return "rank exited";
    case v1::FAILURE_KIND_NODE_LOST:
      return "node lost";
    case v1::FAILURE_KIND_HUNG:
      return "hung";
    case v1::FAILURE_KIND_DETERMINISTIC_STARTUP:
      return "start-up error";
    case v1::FAILURE_KIND_RENDEZVOUS_TIMEOUT:
      return "rendezvous timeout";
    case v1::FAILURE_KIND_PLANNING:
      return "planning";
    case v1::FAILURE_KIND_DIVERGED:
      return "diverged";
    default:
      return "";
  }
}

std::string Timestamp(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return google::protobuf::util::TimeUtil::ToString(t).substr(0, 19) + "Z";
}

std::string Ranks(const google::protobuf::RepeatedField<uint32_t>& ranks) {
  std::vector<int> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  return FormatRankList(sorted);
}

// Text that came over the network (names, ids, errors), as printed: a control character in it
// must not move the cursor or forge a line on the user's terminal.
std::string Shown(std::string_view text) { return EscapeControlCharacters(text); }

std::string Memory(uint64_t bytes) {
  return absl::StrFormat("%.0fGiB", static_cast<double>(bytes) / (1u << 30));
}

}  // namespace

std::string PhaseName(v1::JobPhase phase) {
  switch (phase) {
    case v1::JOB_PHASE_PENDING:
      return "Pending";
    case v1::JOB_PHASE_RENDEZVOUS:
      return "Rendezvous";
    case v1::JOB_PHASE_RUNNING:
      return "Running";
    case v1::JOB_PHASE_RESTARTING:
      return "Restarting";
    case v1::JOB_PHASE_SUCCEEDED:
      return "Succeeded";
    case v1::JOB_PHASE_FAILED:
      return "Failed";
    case v1::JOB_PHASE_CANCELLED:
      return "Cancelled";
    default:
      return "Unknown";
  }
}

bool IsTerminal(v1::JobPhase phase) {
  return phase == v1::JOB_PHASE_SUCCEEDED || phase == v1::JOB_PHASE_FAILED ||
         phase == v1::JOB_PHASE_CANCELLED;
}

std::string WaitingForNodes(const v1::JobStatus& s) {
  if (s.phase() != v1::JOB_PHASE_RENDEZVOUS || !s.has_rendezvous()) return "";
  const v1::RendezvousStatus& r = s.rendezvous();
  if (r.missing_for_min() == 0) return "";
  // A job takes nodes only once its minimum can start: until then the Ready nodes it could have
  // are free_nodes, not joined (0 from an older coordinator, which joined them at once).
  const uint32_t ready = static_cast<uint32_t>(r.joined_node_ids_size()) + r.free_nodes();
  const uint32_t more = r.missing_for_min() > r.free_nodes() ? r.missing_for_min() - r.free_nodes()
                                                             : r.missing_for_min();
  return absl::StrCat("waiting for ", more, " more node", more == 1 ? "" : "s", " (", ready, " of ",
                      r.min_nodes(), " Ready)");
}

std::string SubmitWaitNote(const v1::JobStatus& s, const v1::ListNodesResponse& nodes) {
  if ((s.phase() != v1::JOB_PHASE_RENDEZVOUS && s.phase() != v1::JOB_PHASE_PENDING) ||
      !s.has_rendezvous()) {
    return "";
  }
  const v1::RendezvousStatus& r = s.rendezvous();
  // The nodes that joined this job, and the Ready ones that have not joined yet (the job is a
  // moment old): not the joins alone.
  uint32_t ready = 0;
  for (const v1::NodeInfo& n : nodes.nodes()) {
    ready += n.state() == v1::NODE_STATE_READY || n.job_id() == s.job_id() ? 1 : 0;
  }
  if (ready >= r.min_nodes()) return "";
  const uint32_t more = r.min_nodes() - ready;
  std::string note = absl::StrCat(
      "job ", s.job_id(), " needs ", r.min_nodes(), " node", r.min_nodes() == 1 ? "" : "s",
      "; the cluster has ", ready, " Ready (of ", nodes.nodes_size(), " registered): it waits for ",
      more, " more node", more == 1 ? "" : "s", " (", ready, " of ", r.min_nodes(), " Ready)");
  if (r.has_join_deadline()) {
    absl::StrAppend(&note, " until ", Timestamp(r.join_deadline()),
                    " (the coordinator's join timeout), then fails");
  }
  absl::StrAppend(&note, "; `ringmaster nodes` lists the nodes, `ringmaster cancel ", s.job_id(),
                  "` withdraws the job");
  return note;
}

std::string FormatProgressLine(const v1::JobStatus& s) {
  std::string line = PhaseName(s.phase());
  if (s.phase() == v1::JOB_PHASE_RENDEZVOUS && s.has_rendezvous()) {
    absl::StrAppend(&line, "  nodes ", s.rendezvous().joined_node_ids_size(), "/",
                    s.rendezvous().min_nodes());
    if (s.rendezvous().max_nodes() != s.rendezvous().min_nodes()) {
      absl::StrAppend(&line, "..", s.rendezvous().max_nodes());
    }
    if (const std::string w = WaitingForNodes(s); !w.empty()) absl::StrAppend(&line, "  ", w);
  }
  if (s.step() > 0 || s.total_steps() > 0) {
    absl::StrAppend(&line, "  step ", s.step());
    if (s.total_steps() > 0) absl::StrAppend(&line, "/", s.total_steps());
  }
  if (s.step() > 0) absl::StrAppend(&line, absl::StrFormat("  loss %.4f", s.loss()));
  if (s.samples_per_second() > 0) {
    absl::StrAppend(&line, absl::StrFormat("  %.1f samples/s", s.samples_per_second()));
  }
  if (s.has_eta() && !IsTerminal(s.phase())) {
    absl::StrAppend(
        &line, "  ETA ",
        FormatDuration(static_cast<double>(s.eta().seconds()) + s.eta().nanos() * 1e-9));
  }
  if (s.world_size() > 0) absl::StrAppend(&line, "  world ", s.world_size());
  absl::StrAppend(&line, "  restarts ", s.restarts(), "/", s.max_restarts());
  if (s.has_stall()) {
    absl::StrAppend(&line, "  stalled: rank(s) ", Ranks(s.stall().missing_ranks()),
                    " not in collective #", s.stall().seq());
  }
  if ((s.phase() == v1::JOB_PHASE_FAILED || s.phase() == v1::JOB_PHASE_RESTARTING ||
       s.phase() == v1::JOB_PHASE_CANCELLED) &&
      !s.error().empty()) {
    absl::StrAppend(&line, "  error: ", Shown(s.error()));
  }
  return line;
}

std::string FormatJobDetails(const v1::JobStatus& s) {
  std::string out;
  absl::StrAppend(&out, "job:        ", Shown(s.job_id()), " (", Shown(s.name()), ")\n");
  absl::StrAppend(&out, "phase:      ", PhaseName(s.phase()), "\n");
  absl::StrAppend(&out, "generation: ", s.generation(), "\n");
  absl::StrAppend(&out, "progress:   step ", s.step(), "/", s.total_steps(),
                  absl::StrFormat(", loss %.4f, %.1f samples/s", s.loss(), s.samples_per_second()),
                  "\n");
  absl::StrAppend(&out, "world:      ", s.world_size(), " rank(s) on ", s.num_nodes(),
                  " node(s)\n");
  absl::StrAppend(&out, "restarts:   ", s.restarts(), "/", s.max_restarts(), "\n");
  absl::StrAppend(
      &out, "checkpoint: ",
      s.committed_step() > 0 ? absl::StrCat("step ", s.committed_step()) : std::string("none"),
      "\n");
  if (s.has_rendezvous() && s.phase() == v1::JOB_PHASE_RENDEZVOUS) {
    absl::StrAppend(&out, "rendezvous: ", s.rendezvous().joined_node_ids_size(), " joined (",
                    Shown(absl::StrJoin(s.rendezvous().joined_node_ids(), ", ")), "), ",
                    s.rendezvous().missing_for_min(), " missing for the minimum\n");
    if (const std::string w = WaitingForNodes(s); !w.empty()) {
      absl::StrAppend(&out, "nodes:      ", w,
                      s.rendezvous().has_join_deadline()
                          ? absl::StrCat("; fails at ", Timestamp(s.rendezvous().join_deadline()),
                                         " (join timeout) unless they join")
                          : "",
                      "\n");
    }
  }
  if (!s.error().empty()) {
    std::string kind = FailureName(s.last_failure());
    // A job that went on after a failure keeps its last one, shown as what it was.
    const bool failed = s.phase() == v1::JOB_PHASE_FAILED;
    absl::StrAppend(&out, failed ? "error:      " : "last issue: ",
                    kind.empty() ? "" : absl::StrCat("(", kind, ") "), Shown(s.error()), "\n");
  }
  if (s.has_stall()) {
    const v1::CollectiveStall& st = s.stall();
    absl::StrAppend(&out, "stalled:    rank(s) ", Ranks(st.missing_ranks()),
                    " have not entered collective #", st.seq(), " (", Shown(st.op()),
                    st.waiting_ranks_size() == 1 ? "); rank " : "); ranks ",
                    Ranks(st.waiting_ranks()),
                    absl::StrFormat(" waiting %.1fs", static_cast<double>(st.waited().seconds()) +
                                                          st.waited().nanos() * 1e-9),
                    "\n");
  }
  // The worst straggler, when it costs more than noise.
  const v1::RankStraggler* worst = nullptr;
  for (const v1::RankStraggler& r : s.stragglers()) {
    if (worst == nullptr || r.seconds_per_step() > worst->seconds_per_step()) worst = &r;
  }
  if (worst != nullptr && worst->seconds_per_step() > kStragglerShownAbove) {
    absl::StrAppend(&out, "straggler:  rank ", worst->rank(),
                    absl::StrFormat(" (+%.2f s/step)", worst->seconds_per_step()), "\n");
  }
  for (const std::string& w : s.warnings()) absl::StrAppend(&out, "warning:    ", Shown(w), "\n");
  absl::StrAppend(&out, "created:    ", Timestamp(s.created_at()), "\n");
  absl::StrAppend(&out, "updated:    ", Timestamp(s.updated_at()), "\n");
  return out;
}

std::string FormatJobsTable(const v1::ListJobsResponse& jobs) {
  std::string out = absl::StrFormat("%-24s %-20s %-11s %-13s %-6s %s\n", "JOB", "NAME", "PHASE",
                                    "STEP", "WORLD", "CREATED");
  for (const v1::JobStatus& j : jobs.jobs()) {
    absl::StrAppend(&out, absl::StrFormat("%-24s %-20s %-11s %-13s %-6d %s\n", Shown(j.job_id()),
                                          Shown(j.name()), PhaseName(j.phase()),
                                          absl::StrCat(j.step(), "/", j.total_steps()),
                                          j.world_size(), Timestamp(j.created_at())));
  }
  return out;
}

std::string FormatNodesTable(const v1::ListNodesResponse& nodes) {
  std::string out = absl::StrFormat("%-20s %-14s %-8s %-16s %-6s %-5s %-9s %s\n", "NODE", "ID",
                                    "STATE", "ADDRESS", "RACK", "CPUS", "SAMPLES/S", "GPUS / JOB");
  for (const v1::NodeInfo& n : nodes.nodes()) {
    const v1::NodeInventory& inv = n.inventory();
    std::string gpus;
    for (const v1::GpuInfo& g : inv.gpus()) {
      absl::StrAppend(&gpus, gpus.empty() ? "" : ", ", Shown(g.name()), " sm_",
                      g.compute_capability_major(), g.compute_capability_minor(), " ",
                      Memory(g.memory_bytes()));
    }
    if (gpus.empty()) gpus = "-";
    if (!n.job_id().empty()) absl::StrAppend(&gpus, " / ", Shown(n.job_id()));
    absl::StrAppend(
        &out, absl::StrFormat("%-20s %-14s %-8s %-16s %-6s %-5d %-9s %s\n", Shown(inv.node_name()),
                              Shown(n.node_id()), NodeStateName(n.state()),
                              inv.addresses().empty() ? "-" : Shown(inv.addresses(0)),
                              inv.rack().empty() ? "-" : Shown(inv.rack()), inv.cpu_cores(),
                              inv.trainer_samples_per_second() > 0
                                  ? absl::StrFormat("%.1f", inv.trainer_samples_per_second())
                                  : std::string("-"),
                              gpus));
  }
  return out;
}

}  // namespace ringmaster::cli
