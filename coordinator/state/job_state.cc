// JobState: transitions, generations and the restart budget.
#include "coordinator/state/job_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"

namespace ringmaster::coordinator {
namespace {

constexpr JobPhase kPhases[] = {JobPhase::kPending,    JobPhase::kRendezvous, JobPhase::kRunning,
                                JobPhase::kRestarting, JobPhase::kSucceeded,  JobPhase::kFailed,
                                JobPhase::kCancelled};
constexpr FailureKind kKinds[] = {FailureKind::kNone,
                                  FailureKind::kRankExited,
                                  FailureKind::kNodeLost,
                                  FailureKind::kHung,
                                  FailureKind::kDeterministicStartup,
                                  FailureKind::kRendezvousTimeout,
                                  FailureKind::kPlanning,
                                  FailureKind::kDiverged};

}  // namespace

std::string_view JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return "Pending";
    case JobPhase::kRendezvous:
      return "Rendezvous";
    case JobPhase::kRunning:
      return "Running";
    case JobPhase::kRestarting:
      return "Restarting";
    case JobPhase::kSucceeded:
      return "Succeeded";
    case JobPhase::kFailed:
      return "Failed";
    case JobPhase::kCancelled:
      return "Cancelled";
  }
  return "?";
}

absl::StatusOr<JobPhase> ParseJobPhase(std::string_view name) {
  for (JobPhase p : kPhases) {
    if (JobPhaseName(p) == name) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown job phase '", ToAbsl(name), "'"));
}

bool IsTerminal(JobPhase phase) {
  return phase == JobPhase::kSucceeded || phase == JobPhase::kFailed ||
         phase == JobPhase::kCancelled;
}

bool IsLegalTransition(JobPhase from, JobPhase to) {
  if (IsTerminal(from)) return false;
  if (to == JobPhase::kFailed || to == JobPhase::kCancelled) return true;
  switch (from) {
    case JobPhase::kPending:
      return to == JobPhase::kRendezvous;
    case JobPhase::kRendezvous:
      return to == JobPhase::kRunning;
    case JobPhase::kRunning:
      return to == JobPhase::kRestarting || to == JobPhase::kSucceeded;
    case JobPhase::kRestarting:
      return to == JobPhase::kRendezvous;
    default:
      return false;
  }
}

std::string_view FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kRankExited:
      return "rank_exited";
    case FailureKind::kNodeLost:
      return "node_lost";
    case FailureKind::kHung:
      return "hung";
    case FailureKind::kDeterministicStartup:
      return "deterministic_startup";
    case FailureKind::kRendezvousTimeout:
      return "rendezvous_timeout";
    case FailureKind::kPlanning:
      return "planning";
    case FailureKind::kDiverged:
      return "diverged";
  }
  return "?";
}

absl::StatusOr<FailureKind> ParseFailureKind(std::string_view name) {
  for (FailureKind k : kKinds) {
    if (FailureKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown failure kind '", ToAbsl(name), "'"));
}

JobState::JobState(std::string job_id, int max_restarts, JobStateSnapshot snapshot)
    : job_id_(std::move(job_id)),
      max_restarts_(std::max(0, max_restarts)),
      s_(std::move(snapshot)) {}

absl::Status JobState::TransitionTo(JobPhase to) {
  if (!IsLegalTransition(s_.phase, to)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id_, ": illegal transition ",
                                                      ToAbsl(JobPhaseName(s_.phase)), " -> ",
                                                      ToAbsl(JobPhaseName(to))));
  }
  s_.phase = to;
  return absl::OkStatus();
}

absl::Status JobState::BeginRendezvous() { return TransitionTo(JobPhase::kRendezvous); }

absl::Status JobState::StartRunning() { return TransitionTo(JobPhase::kRunning); }

absl::Status JobState::Succeed() { return TransitionTo(JobPhase::kSucceeded); }

absl::Status JobState::Cancel(std::string_view reason) {
  absl::Status st = TransitionTo(JobPhase::kCancelled);
  if (st.ok())
    s_.error = reason.empty() ? "cancelled" : absl::StrCat("cancelled: ", ToAbsl(reason));
  return st;
}

absl::Status JobState::Fail(Failure failure) {
  absl::Status st = TransitionTo(JobPhase::kFailed);
  if (st.ok()) {
    s_.last_failure = failure.kind;
    s_.error = absl::StrCat(ToAbsl(FailureKindName(failure.kind)), ": ", failure.detail);
  }
  return st;
}

absl::StatusOr<FailureOutcome> JobState::ReportFailure(int64_t generation, Failure failure) {
  if (failure.kind == FailureKind::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id_, ": failure report without a kind: ", failure.detail));
  }
  if (generation > s_.generation) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id_, ": failure reported for generation ", generation,
                     ", but the job is at generation ", s_.generation));
  }
  if (generation < s_.generation || IsTerminal(s_.phase)) return FailureOutcome::kIgnored;
  if (s_.phase != JobPhase::kRunning) {
    // Restarting always has a newer generation than any running rank, so this is Pending or
    // Rendezvous: no ranks of this generation exist yet.
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id_, ": failure reported while ", ToAbsl(JobPhaseName(s_.phase)),
                     " (no ranks of generation ", generation, " run yet)"));
  }
  const std::string what =
      absl::StrCat(ToAbsl(FailureKindName(failure.kind)), ": ", failure.detail);
  if (failure.kind == FailureKind::kDeterministicStartup ||
      failure.kind == FailureKind::kDiverged) {
    s_.phase = JobPhase::kFailed;
    s_.last_failure = failure.kind;
    s_.error = absl::StrCat(what, failure.kind == FailureKind::kDiverged
                                      ? " (training diverged; a restart from the last checkpoint "
                                        "would diverge again; not restarted)"
                                      : " (a start-up error that a restart cannot fix; not "
                                        "restarted)");
    return FailureOutcome::kFailed;
  }
  if (s_.restarts >= max_restarts_) {
    s_.phase = JobPhase::kFailed;
    s_.last_failure = failure.kind;
    s_.error = absl::StrCat("restart limit reached (restart.max_restarts: ", max_restarts_, ", ",
                            s_.restarts, " used); last failure: ", what);
    return FailureOutcome::kFailed;
  }
  s_.phase = JobPhase::kRestarting;
  s_.restarts += 1;
  s_.generation += 1;
  s_.last_failure = failure.kind;
  s_.error = absl::StrCat("restart ", s_.restarts, " of ", max_restarts_, " (generation ",
                          s_.generation, ") after ", what);
  return FailureOutcome::kRestarting;
}

}  // namespace ringmaster::coordinator
