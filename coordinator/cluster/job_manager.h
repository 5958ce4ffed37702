// One job's manager: drives JobState, the generation's Rendezvous and PlanRanks from events
// (nodes joining, rank reports from agents, lost nodes, deadlines, cancel), sends StartRanks /
// StopRanks to the agents through AgentChannels, persists every phase change through JobDb, and
// keeps the progress that GetJob / WatchJob show.
//
// A generation's life: Rendezvous (nodes offered by the owner join, within MIN:MAX) → plan →
// StartRanks to every participant → Running. Then, from the agents' reports:
//  - every rank exited 0 → Succeeded;
//  - a rank exited 3 (the trainer's "the job itself is wrong") or was marked
//    FAILURE_KIND_DETERMINISTIC_STARTUP by its agent, before any rank of the generation made
//    progress → Failed at once, with the rank's last error line, no restart spent;
//  - any other exit, a signal, a failed start, a refused StartRanks or a lost node → StopRanks
//    (old generation) to the participants, generation + 1, restarts + 1, Rendezvous again with
//    whichever nodes the owner offers (the trainer resumes from its checkpoint by itself);
//    beyond restart.max_restarts → Failed.
// Rendezvous join timeout → Failed (rendezvous_timeout); a plan the nodes cannot run → Failed
// (planning).
//
// Restoring after a coordinator restart (Restore): Pending and Restarting jobs rendezvous again;
// a Rendezvous job starts a fresh rendezvous (no ranks ran); a Running job goes to Restarting
// with generation + 1 and rendezvous again — its old ranks may still run on agents that kept
// going, and the owner stops any rank that reports an older generation. The coordinator's own
// restart is not the job's fault, so it does not spend a restart.
//
// While Running, the ranks' collective traces give the hang diagnosis and straggler scores of
// coordinator/state/hang_diagnosis.h: Status() carries them, and Tick() logs a warning the first
// time each stall is seen.
//
// Not thread-safe: the owner (Cluster) serialises every call.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/cluster/agent_channel.h"
#include "coordinator/plan/job_requirements.h"
#include "coordinator/plan/planner.h"
#include "coordinator/state/clock.h"
#include "coordinator/state/hang_diagnosis.h"
#include "coordinator/state/job_db.h"
#include "coordinator/state/job_state.h"
#include "coordinator/state/rendezvous.h"
#include "ringmaster/v1/agent.pb.h"
#include "ringmaster/v1/types.pb.h"

namespace ringmaster::coordinator {

// Exit code of a trainer whose job is wrong (bad spec, missing file): deterministic.
inline constexpr int kTrainerJobErrorExitCode = 3;

struct JobManagerOptions {
  std::string coordinator_address;                // RINGMASTER_COORDINATOR for the ranks
  int master_port = 29500;                        // MASTER_PORT: rank 0's own rendezvous store
  absl::Duration stop_grace = absl::Seconds(30);  // StopRanks.grace_period (SIGTERM → SIGKILL)
  // A wait inside a collective that other ranks have not entered, longer than this, is a stall.
  absl::Duration stall_after = absl::Seconds(10);
  StragglerOptions stragglers;
};

class JobManager {
 public:
  // A job just stored by JobDb::CreateJob (Pending): moves it to Rendezvous and persists.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(JobRecord record,
                                                            JobRequirements requirements,
                                                            const JobManagerOptions& options,
                                                            JobDb& db, const Clock& clock);
  // A job read back from the database after a coordinator restart (see the header comment).
  // `windows` gives the rendezvous windows (its node counts come from the spec). A spec that no
  // longer parses fails the job (planning) instead of refusing to start the coordinator.
  static absl::StatusOr<std::unique_ptr<JobManager>> Restore(JobRecord record,
                                                             const RendezvousOptions& windows,
                                                             const JobManagerOptions& options,
                                                             JobDb& db, const Clock& clock);

  const std::string& id() const { return record_.id; }
  JobPhase phase() const { return state_.phase(); }
  int64_t generation() const { return state_.generation(); }
  bool terminal() const { return IsTerminal(state_.phase()); }
  // In Rendezvous with room for another node.
  bool AcceptingNodes();
  // While accepting nodes: how many more it needs before its minimum can start (0 otherwise).
  int NodesMissingForMin();
  // The nodes this job holds: joined to its rendezvous, or running its current generation.
  std::vector<std::string> nodes() const;
  // When Tick() next has something to do (a rendezvous deadline); nullopt: nothing pending.
  std::optional<absl::Time> NextDeadline() const;

  // `node` joins the current rendezvous; commands for it go through `channel`. A join that
  // completes the rendezvous (MAX nodes) plans and starts the generation.
  absl::Status Join(const PlanNode& node, std::shared_ptr<AgentChannel> channel);
  // Applies rendezvous deadlines: last call over → plan and start; join timeout → Failed.
  // While Running, logs a stall the first time it is seen.
  absl::Status Tick();
  // The node's agent is gone (no heartbeat within lost_after, or it re-registered after a
  // restart): it leaves the rendezvous, or its generation fails (restart or Failed).
  absl::Status NodeLost(std::string_view node_id, std::string_view why);
  // A report about one rank of this job's current generation from the agent of `node_id`
  // (reports about other generations, or from a node that does not run that rank, are ignored).
  absl::Status OnRankReport(std::string_view node_id, const v1::RankProgress& report);
  // The agent refused command `command_id`; a refused StartRanks fails the generation.
  absl::Status OnCommandError(std::string_view node_id, uint64_t command_id,
                              std::string_view error);
  // Stops the ranks and ends the job Cancelled. A job that already ended is left as it is.
  absl::Status Cancel(std::string_view reason);

  // The job as the CLI sees it.
  v1::JobStatus Status();
  // The node that ran `rank` in the newest generation this coordinator started, and that
  // generation (kept after the job ends, for its logs). Nullopt: no such rank, or none started
  // since this coordinator started.
  std::optional<std::pair<std::string, int64_t>> NodeOfRank(int rank) const;
  // The world size of that generation (0: none started since this coordinator started).
  size_t last_world_size() const { return last_rank_nodes_.size(); }
  const JobRecord& record() const { return record_; }

  // Ranks holding the current generation up (Running only); nullopt: no stall.
  std::optional<StallDiagnosis> Stall() const;
  // How long the last rendezvous this coordinator completed took (gather start to launch);
  // nullopt before the first.
  std::optional<absl::Duration> last_rendezvous() const {
    if (rendezvous_durations_.empty()) return std::nullopt;
    return rendezvous_durations_.back();
  }
  // Every rendezvous of this job completed since the coordinator started (one per generation).
  const std::vector<absl::Duration>& rendezvous_durations() const { return rendezvous_durations_; }

 private:
  struct Participant {
    PlanNode node;
    std::shared_ptr<AgentChannel> channel;
  };
  struct RankState {
    std::string node_id;
    bool exited_ok = false;
    RankTrace trace;  // the latest report that carried one
  };

  JobManager(JobRecord record, std::optional<JobRequirements> requirements,
             const JobManagerOptions& options, JobDb& db, const Clock& clock);

  absl::Status Persist();
  absl::Status BeginRendezvous();
  absl::Status Launch();  // the rendezvous completed: plan, Running, StartRanks
  // A failure of the current generation: restart (StopRanks, generation + 1, rendezvous) or
  // Failed (StopRanks). `skip_node` gets no StopRanks (it is lost).
  absl::Status HandleFailure(Failure failure, std::string_view skip_node = {});
  absl::Status Finish(absl::Status transition);  // after a terminal transition
  void StopParticipants(int64_t generation, std::string_view reason, std::string_view skip_node);
  void ClearGeneration();
  // Each tick while Running: a warning the first time a collective's stall is seen, and
  // held_up_ kept up to date.
  void ObserveStall();
  // When a rank's failure ends a generation: the stall that was still unresolved (its missing
  // ranks never entered the collective), e.g. a frozen rank whose peers' collective timed out.
  // A timeout names only the peer it gave up on; this names every rank that held the job up.
  // Empty when there was none.
  std::string StallAtFailure() const;
  Participant* FindParticipant(std::string_view node_id);

  JobRecord record_;
  std::optional<JobRequirements> requirements_;  // absent only for jobs that already ended
  JobManagerOptions options_;
  JobDb& db_;
  const Clock& clock_;
  JobState state_;

  // The current generation.
  std::optional<Rendezvous> rendezvous_;
  std::vector<Participant> participants_;  // joined (Rendezvous) or running (Running)
  std::optional<JobPlan> plan_;
  std::vector<RankState> ranks_;                               // by global rank, while Running
  absl::flat_hash_map<uint64_t, std::string> start_commands_;  // StartRanks id → node
  bool progressed_ = false;  // some rank of this generation has reported progress
  StragglerTracker stragglers_;
  uint64_t logged_stall_seq_ = 0;  // the collective of this generation whose stall was logged
  // The newest stall of this generation, until its missing ranks enter the collective and run
  // (the waiting ranks leaving it, e.g. by timing out, does not resolve it).
  std::optional<StallDiagnosis> held_up_;

  // Where each rank of the newest started generation ran (survives ClearGeneration).
  std::vector<std::string> last_rank_nodes_;
  int64_t last_generation_ = -1;
  std::vector<absl::Duration> rendezvous_durations_;

  // Progress, from rank 0: step, loss, and throughput over a window of its step counter.
  int64_t step_ = 0;
  int64_t total_steps_ = 0;
  double loss_ = 0;
  struct StepSeen {
    absl::Time at;  // when a report first showed `step`
    int64_t step;
  };
  // This generation's steps as rank 0 reported them, the oldest one kRateWindow or more before
  // the newest kept as the window's start.
  std::deque<StepSeen> steps_seen_;
  // Samples/s of the job: the steps between the window's ends times the global batch size,
  // over the time between them. Not a sum of the ranks' own rates, which are measured at
  // different moments and over different spans.
  double SamplesPerSecond() const;
};

}  // namespace ringmaster::coordinator
