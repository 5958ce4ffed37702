// A job's lifecycle as a state machine: phases, legal transitions, generations and the restart
// budget. Pure logic; the caller persists snapshots (JobDb) and acts on the outcomes.
//
//   Pending ──► Rendezvous ──► Running ──► Succeeded
//                  ▲              │
//                  └─ Restarting ◄┘ (a failure within the restart budget; generation + 1)
//   and every non-terminal phase ──► Failed | Cancelled.
//
// The generation numbers the attempts: it bumps on every restart and reaches the ranks as
// TORCHELASTIC_RESTART_COUNT, scoping their rendezvous keys, so ranks of a dead generation never
// meet the new one. Restarts are counted for the whole job (restart.max_restarts), not per node.
// A deterministic start-up failure (the trainer reported a bad config or a missing file before
// its first step) fails the job at once: running it again could only fail the same way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::coordinator {

enum class JobPhase {
  kPending,
  kRendezvous,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kCancelled
};

// "Pending", "Rendezvous", ... (stable: stored in the job database).
std::string_view JobPhaseName(JobPhase phase);
absl::StatusOr<JobPhase> ParseJobPhase(std::string_view name);
bool IsTerminal(JobPhase phase);
bool IsLegalTransition(JobPhase from, JobPhase to);

enum class FailureKind {
  kNone,
  kRankExited,            // a trainer exited non-zero or died from a signal
  kNodeLost,              // an agent's heartbeats stopped
  kHung,                  // no progress within the collective timeout
  kDeterministicStartup,  // config / missing-file error before the first step: never restarted
  kRendezvousTimeout,     // fewer than MIN nodes within the join timeout
  kPlanning,              // the joined nodes cannot run the job (e.g. bf16 on a P40)
  kDiverged,              // the loss or gradient norm became NaN/inf: never restarted
};

// "none", "rank_exited", ... (stable: stored in the job database).
std::string_view FailureKindName(FailureKind kind);
absl::StatusOr<FailureKind> ParseFailureKind(std::string_view name);

struct Failure {
  FailureKind kind = FailureKind::kNone;
  std::string detail;  // e.g. "rank 3 on node-b exited with code 1: CUDA error: out of memory"
};

// Everything JobState holds that must survive a coordinator restart.
struct JobStateSnapshot {
  JobPhase phase = JobPhase::kPending;
  int64_t generation = 0;
  int restarts = 0;
  std::string error;  // why the job failed or was cancelled, or the cause of the last restart
  FailureKind last_failure = FailureKind::kNone;
};

// What ReportFailure decided.
enum class FailureOutcome {
  kIgnored,     // from an earlier generation, or the job already ended: nothing to do
  kRestarting,  // generation bumped, phase Restarting: stop the survivors, rendezvous again
  kFailed,      // phase Failed: stop everything
};

// Not thread-safe: one owner (the job's manager) drives it.
class JobState {
 public:
  // A new job (Pending, generation 0), or one restored from `snapshot`. `job_id` only names the
  // job in error messages. max_restarts < 0 is treated as 0.
  JobState(std::string job_id, int max_restarts, JobStateSnapshot snapshot = {});

  const JobStateSnapshot& snapshot() const { return s_; }
  JobPhase phase() const { return s_.phase; }
  int64_t generation() const { return s_.generation; }
  int restarts() const { return s_.restarts; }
  int max_restarts() const { return max_restarts_; }
  const std::string& error() const { return s_.error; }

  // Pending or Restarting → Rendezvous.
  absl::Status BeginRendezvous();
  // Rendezvous → Running (ranks of generation() are being started).
  absl::Status StartRunning();
  // Running → Succeeded.
  absl::Status Succeed();
  // Any non-terminal phase → Cancelled, recording `reason`.
  absl::Status Cancel(std::string_view reason);
  // Any non-terminal phase → Failed, without spending a restart: a rendezvous that timed out,
  // a plan that cannot work.
  absl::Status Fail(Failure failure);

  // A failure of the ranks of `generation`. While Running that generation: a deterministic
  // start-up failure → Failed; otherwise a restart when the budget allows (restarts + 1,
  // generation + 1, Restarting), else Failed naming the limit and the last failure. Reports
  // about an earlier generation, or arriving after the job ended, are kIgnored (one incident
  // typically reaches the coordinator from many ranks). Errors: InvalidArgument for a
  // generation ahead of the job's, or kind kNone; FailedPrecondition while Pending or
  // Rendezvous (no ranks run then).
  absl::StatusOr<FailureOutcome> ReportFailure(int64_t generation, Failure failure);

 private:
  // FailedPrecondition naming the job, `from` and `to` unless the transition is legal.
  absl::Status TransitionTo(JobPhase to);

  std::string job_id_;
  int max_restarts_;
  JobStateSnapshot s_;
};

}  // namespace ringmaster::coordinator
