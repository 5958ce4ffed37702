// JobManager: one job's generations, from rendezvous to the last rank's exit.
#include "coordinator/cluster/job_manager.h"

#include <algorithm>
#include <csignal>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/log.h"
#include "common/log_escape.h"
#include "common/rank_list.h"
#include "coordinator/cluster/proto_convert.h"

namespace ringmaster::coordinator {
namespace {

// The span job throughput is measured over: long enough to smooth the agents' report intervals
// (the time a step is first seen is when a report shows it), short enough to follow changes.
constexpr absl::Duration kRateWindow = absl::Seconds(30);

std::string RankExitDetail(int global_rank, std::string_view node_id, const v1::RankProgress& r) {
  std::string what;
  switch (r.state()) {
    case v1::RANK_PROCESS_STATE_EXITED:
      what = absl::StrCat("exited with code ", r.exit_code());
      break;
    case v1::RANK_PROCESS_STATE_SIGNALED:
      what = absl::StrCat("was killed by signal ", r.signal());
      break;
    default:
      what = "failed to start";
      break;
  }
  std::string detail = absl::StrCat("rank ", global_rank, " on ", ToAbsl(node_id), " ", what);
  // Stored and shown as the job's error: an agent's text, escaped (common/log_escape.h).
  if (!r.last_error_line().empty()) {
    absl::StrAppend(&detail, ": ", EscapeControlCharacters(r.last_error_line()));
  }
  return detail;
}

// Signals of a fault in the process itself (not sent by someone else).
bool IsFaultSignal(int signal) {
  return signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE;
}

}  // namespace

JobManager::JobManager(JobRecord record, std::optional<JobRequirements> requirements,
                       const JobManagerOptions& options, JobDb& db, const Clock& clock)
    : record_(std::move(record)),
      requirements_(std::move(requirements)),
      options_(options),
      db_(db),
      clock_(clock),
      state_(record_.id, record_.max_restarts, record_.state),
      stragglers_(options.stragglers) {}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(JobRecord record,
                                                               JobRequirements requirements,
                                                               const JobManagerOptions& options,
                                                               JobDb& db, const Clock& clock) {
  std::unique_ptr<JobManager> m(
      new JobManager(std::move(record), std::move(requirements), options, db, clock));
  if (absl::Status st = m->BeginRendezvous(); !st.ok()) return st;
  return m;
}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Restore(JobRecord record,
                                                                const RendezvousOptions& windows,
                                                                const JobManagerOptions& options,
                                                                JobDb& db, const Clock& clock) {
  if (IsTerminal(record.state.phase)) {
    return std::unique_ptr<JobManager>(
        new JobManager(std::move(record), std::nullopt, options, db, clock));
  }
  absl::StatusOr<JobRequirements> req =
      ParseJobRequirements(record.spec_yaml, record.name + ".yaml", record.base_dir, windows);
  if (!req.ok()) {
    std::unique_ptr<JobManager> m(
        new JobManager(std::move(record), std::nullopt, options, db, clock));
    absl::Status st = m->Finish(
        m->state_.Fail({FailureKind::kPlanning,
                        absl::StrCat("the job spec no longer parses after a coordinator restart: ",
                                     req.status().message())}));
    if (!st.ok()) return st;
    return m;
  }
  JobRecord r = std::move(record);
  const JobPhase was = r.state.phase;
  if (was == JobPhase::kRunning) {
    // Ranks of the old generation may still run; a new generation keeps them apart.
    r.state.generation += 1;
    r.state.phase = JobPhase::kRestarting;
    r.state.error = absl::StrCat("the coordinator restarted while generation ",
                                 r.state.generation - 1, " ran; rendezvous again as generation ",
                                 r.state.generation, " (not counted as a restart)");
  }
  std::unique_ptr<JobManager> m(
      new JobManager(std::move(r), std::move(req).value(), options, db, clock));
  if (was == JobPhase::kRunning) {
    if (absl::Status st = m->Persist(); !st.ok()) return st;
  }
  if (was == JobPhase::kRendezvous) {
    absl::StatusOr<Rendezvous> rv = Rendezvous::Start(m->requirements_->rendezvous, clock);
    if (!rv.ok()) return rv.status();
    m->rendezvous_.emplace(*std::move(rv));
    return m;
  }
  if (absl::Status st = m->BeginRendezvous(); !st.ok()) return st;
  LogInfo(absl::StrCat("job ", m->id(), ": restored from ", ToAbsl(JobPhaseName(was)),
                       ", generation ", m->generation(), " rendezvous again"));
  return m;
}

absl::Status JobManager::Persist() {
  record_.state = state_.snapshot();
  absl::StatusOr<JobRecord> stored = db_.UpdateJob(record_);
  if (!stored.ok()) {
    LogError(absl::StrCat("job ", record_.id, ": cannot persist phase ",
                          ToAbsl(JobPhaseName(state_.phase())), ": ", stored.status().ToString()));
    return stored.status();
  }
  record_.updated_at = stored->updated_at;
  return absl::OkStatus();
}

absl::Status JobManager::BeginRendezvous() {
  if (absl::Status st = state_.BeginRendezvous(); !st.ok()) return st;
  absl::StatusOr<Rendezvous> rv = Rendezvous::Start(requirements_->rendezvous, clock_);
  if (!rv.ok()) return rv.status();
  rendezvous_.emplace(*std::move(rv));
  LogInfo(absl::StrCat("job ", id(), ": generation ", generation(), " rendezvous for ",
                       requirements_->rendezvous.min_nodes, ":",
                       requirements_->rendezvous.max_nodes, " nodes"));
  return Persist();
}

bool JobManager::AcceptingNodes() {
  if (state_.phase() != JobPhase::kRendezvous || !rendezvous_) return false;
  return rendezvous_->Poll().open_slots > 0;
}

int JobManager::NodesMissingForMin() {
  if (!AcceptingNodes()) return 0;
  return rendezvous_->Poll().missing_for_min;
}

std::vector<std::string> JobManager::nodes() const {
  std::vector<std::string> ids;
  ids.reserve(participants_.size());
  for (const Participant& p : participants_) ids.push_back(p.node.node_id);
  return ids;
}

std::optional<absl::Time> JobManager::NextDeadline() const {
  if (state_.phase() != JobPhase::kRendezvous || !rendezvous_) return std::nullopt;
  return rendezvous_->NextDeadline();
}

JobManager::Participant* JobManager::FindParticipant(std::string_view node_id) {
  for (Participant& p : participants_) {
    if (p.node.node_id == node_id) return &p;
  }
  return nullptr;
}

absl::Status JobManager::Join(const PlanNode& node, std::shared_ptr<AgentChannel> channel) {
  if (!AcceptingNodes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id(), " (", ToAbsl(JobPhaseName(state_.phase())), ") takes no nodes now"));
  }
  if (FindParticipant(node.node_id) != nullptr) return absl::OkStatus();
  if (absl::Status st = rendezvous_->Join(node.node_id); !st.ok()) return st;
  participants_.push_back({node, std::move(channel)});
  LogInfo(absl::StrCat("job ", id(), ": node ", node.node_id, " joined generation ", generation(),
                       " (", participants_.size(), " of ", rendezvous_->options().min_nodes, ":",
                       rendezvous_->options().max_nodes, ")"));
  return Tick();
}

absl::Status JobManager::Tick() {
  if (state_.phase() == JobPhase::kRunning) {
    ObserveStall();
    return absl::OkStatus();
  }
  if (state_.phase() != JobPhase::kRendezvous || !rendezvous_) return absl::OkStatus();
  const RendezvousStatus& rs = rendezvous_->Poll();
  if (rs.state == RendezvousState::kFailed) {
    return Finish(state_.Fail({FailureKind::kRendezvousTimeout, std::string(rs.error.message())}));
  }
  if (rs.state == RendezvousState::kComplete) return Launch();
  return absl::OkStatus();
}

absl::Status JobManager::Launch() {
  std::vector<PlanNode> nodes;
  nodes.reserve(participants_.size());
  for (const Participant& p : participants_) nodes.push_back(p.node);
  PlanRequest request = requirements_->plan;
  request.job_id = id();
  request.generation = generation();
  request.coordinator_address = options_.coordinator_address;
  request.master_port = options_.master_port;
  absl::StatusOr<JobPlan> plan = PlanRanks(request, nodes);
  if (!plan.ok()) {
    return Finish(state_.Fail({FailureKind::kPlanning, std::string(plan.status().message())}));
  }
  plan_ = *std::move(plan);
  rendezvous_durations_.push_back(clock_.Now() - rendezvous_->Poll().started);
  rendezvous_.reset();
  for (const std::string& w : plan_->warnings) {
    LogWarning(absl::StrCat("job ", id(), ": ", w));
  }
  if (absl::Status st = state_.StartRunning(); !st.ok()) return st;
  absl::Status persisted = Persist();

  ranks_.assign(plan_->world_size, RankState{});
  last_rank_nodes_.assign(static_cast<size_t>(plan_->world_size), std::string());
  last_generation_ = generation();
  start_commands_.clear();
  progressed_ = false;
  stragglers_.Reset(plan_->world_size);
  logged_stall_seq_ = 0;
  held_up_.reset();
  // By node id: a linear search per node was quadratic at thousands of nodes.
  absl::flat_hash_map<std::string, Participant*> by_node;
  by_node.reserve(participants_.size());
  for (Participant& p : participants_) by_node[p.node.node_id] = &p;
  for (const NodePlan& np : plan_->nodes) {
    v1::CoordinatorMessage msg;
    v1::StartRanks* start = msg.mutable_start_ranks();
    start->set_job_id(id());
    start->set_generation(generation());
    start->set_job_yaml(record_.spec_yaml);
    start->set_base_dir(record_.base_dir);
    start->set_world_size(static_cast<uint32_t>(plan_->world_size));
    for (const auto& [k, v] : plan_->common_env) (*start->mutable_common_env())[k] = v;
    for (int r = np.first_rank; r < np.first_rank + np.num_ranks; ++r) {
      const RankPlan& rp = plan_->ranks[r];
      ranks_[r].node_id = np.node_id;
      last_rank_nodes_[static_cast<size_t>(r)] = np.node_id;
      v1::RankLaunch* launch = start->add_ranks();
      launch->set_global_rank(static_cast<uint32_t>(rp.global_rank));
      launch->set_local_rank(static_cast<uint32_t>(rp.local_rank));
      launch->set_gpu_index(rp.gpu_index);
      for (const auto& [k, v] : rp.env) (*launch->mutable_env())[k] = v;
      launch->set_micro_batch_weight(rp.weight);
    }
    auto found = by_node.find(np.node_id);
    if (found == by_node.end()) continue;  // the planner plans only the nodes it was given
    Participant* p = found->second;
    start_commands_[p->channel->Send(std::move(msg))] = np.node_id;
  }
  LogInfo(absl::StrCat("job ", id(), ": generation ", generation(), " running ", plan_->world_size,
                       " ranks on ", plan_->nodes.size(), " nodes"));
  return persisted;
}

void JobManager::StopParticipants(int64_t generation, std::string_view reason,
                                  std::string_view skip_node) {
  for (Participant& p : participants_) {
    if (p.node.node_id == skip_node) continue;
    v1::CoordinatorMessage msg;
    v1::StopRanks* stop = msg.mutable_stop_ranks();
    stop->set_job_id(id());
    stop->set_generation(generation);
    SetDuration(options_.stop_grace, stop->mutable_grace_period());
    stop->set_reason(std::string(reason));
    p.channel->Send(std::move(msg));
  }
}

std::optional<std::pair<std::string, int64_t>> JobManager::NodeOfRank(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(last_rank_nodes_.size())) return std::nullopt;
  return std::make_pair(last_rank_nodes_[static_cast<size_t>(rank)], last_generation_);
}

void JobManager::ClearGeneration() {
  participants_.clear();
  plan_.reset();
  rendezvous_.reset();
  ranks_.clear();
  start_commands_.clear();
  progressed_ = false;
  stragglers_.Reset(0);
  logged_stall_seq_ = 0;
  held_up_.reset();
  steps_seen_.clear();
}

double JobManager::SamplesPerSecond() const {
  if (steps_seen_.size() < 2 || !requirements_) return 0;
  const StepSeen& first = steps_seen_.front();
  const StepSeen& last = steps_seen_.back();
  const double seconds = absl::ToDoubleSeconds(last.at - first.at);
  if (!(seconds > 0)) return 0;
  // Every step takes global_batch_size samples (an epoch's last batch may hold fewer).
  return static_cast<double>(last.step - first.step) * requirements_->spec.train.global_batch_size /
         seconds;
}

absl::Status JobManager::Finish(absl::Status transition) {
  if (!transition.ok()) return transition;
  LogInfo(absl::StrCat("job ", id(), ": ", ToAbsl(JobPhaseName(state_.phase())),
                       state_.error().empty() ? "" : ": ", state_.error()));
  ClearGeneration();
  return Persist();
}

absl::Status JobManager::HandleFailure(Failure failure, std::string_view skip_node) {
  const int64_t old_generation = generation();
  if (failure.kind == FailureKind::kRankExited) {
    if (std::string stall = StallAtFailure(); !stall.empty()) {
      absl::StrAppend(&failure.detail, " [", stall, "]");
    }
  }
  const std::string detail = failure.detail;
  absl::StatusOr<FailureOutcome> outcome = state_.ReportFailure(old_generation, std::move(failure));
  if (!outcome.ok()) return outcome.status();
  if (*outcome == FailureOutcome::kIgnored) return absl::OkStatus();
  StopParticipants(old_generation, detail, skip_node);
  if (*outcome == FailureOutcome::kFailed) return Finish(absl::OkStatus());
  LogWarning(absl::StrCat("job ", id(), ": ", state_.error()));
  ClearGeneration();
  if (absl::Status st = Persist(); !st.ok()) return st;  // Restarting
  return BeginRendezvous();
}

absl::Status JobManager::NodeLost(std::string_view node_id, std::string_view why) {
  if (FindParticipant(node_id) == nullptr) return absl::OkStatus();
  if (state_.phase() == JobPhase::kRendezvous) {
    if (absl::Status st = rendezvous_->Leave(node_id); !st.ok() && !absl::IsNotFound(st)) return st;
    participants_.erase(
        std::find_if(participants_.begin(), participants_.end(),
                     [&](const Participant& p) { return p.node.node_id == node_id; }));
    LogInfo(absl::StrCat("job ", id(), ": node ", ToAbsl(node_id),
                         " left the rendezvous: ", ToAbsl(why)));
    return Tick();
  }
  if (state_.phase() != JobPhase::kRunning) return absl::OkStatus();
  return HandleFailure(
      {FailureKind::kNodeLost, absl::StrCat("node ", ToAbsl(node_id), " lost: ", ToAbsl(why))},
      node_id);
}

absl::Status JobManager::OnRankReport(std::string_view node_id, const v1::RankProgress& r) {
  if (state_.phase() != JobPhase::kRunning || r.generation() != generation()) {
    return absl::OkStatus();
  }
  const int rank = static_cast<int>(r.global_rank());
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || ranks_[rank].node_id != node_id) {
    return absl::OkStatus();
  }
  RankState& rs = ranks_[rank];
  // Rank 0's agent reports the newest committed checkpoint, also with the rank's exit (the last
  // checkpoint is written just before it).
  if (rank == 0 && r.committed_step() > record_.committed_step) {
    record_.committed_step = r.committed_step();
    if (absl::Status st = Persist(); !st.ok()) return st;
  }
  switch (r.state()) {
    case v1::RANK_PROCESS_STATE_STARTING:
    case v1::RANK_PROCESS_STATE_RUNNING: {
      if (r.state() == v1::RANK_PROCESS_STATE_RUNNING || r.step() > 0) progressed_ = true;
      if (r.has_trace()) {
        rs.trace = TraceFromProto(r);
        stragglers_.Observe(rank, clock_.Now(), r.comm_seconds(), r.steps_this_process());
      }
      if (rank == 0) {
        if (r.step() > 0 && (steps_seen_.empty() || r.step() > steps_seen_.back().step)) {
          const absl::Time now = clock_.Now();
          steps_seen_.push_back({now, r.step()});
          while (steps_seen_.size() > 2 && now - steps_seen_[1].at >= kRateWindow) {
            steps_seen_.pop_front();
          }
        }
        step_ = r.step();
        if (r.total_steps() > 0) total_steps_ = r.total_steps();
        loss_ = r.loss();
      }
      return absl::OkStatus();
    }
    case v1::RANK_PROCESS_STATE_EXITED:
      if (r.exit_code() == 0) {
        if (rs.exited_ok) return absl::OkStatus();
        rs.exited_ok = true;
        // The exit report carries the last step and its loss: a fast run (or one stopped early)
        // may end many steps after the last report seen running, whose loss belongs to that step.
        if (rank == 0 && r.step() > 0) {
          step_ = r.step();
          loss_ = r.loss();
        }
        if (std::all_of(ranks_.begin(), ranks_.end(),
                        [](const RankState& s) { return s.exited_ok; })) {
          return Finish(state_.Succeed());
        }
        return absl::OkStatus();
      }
      if (r.failure_kind() == v1::FAILURE_KIND_DIVERGED) {
        return HandleFailure({FailureKind::kDiverged, RankExitDetail(rank, node_id, r)});
      }
      if ((r.exit_code() == kTrainerJobErrorExitCode && !progressed_) ||
          r.failure_kind() == v1::FAILURE_KIND_DETERMINISTIC_STARTUP) {
        return HandleFailure(
            {FailureKind::kDeterministicStartup, RankExitDetail(rank, node_id, r)});
      }
      return HandleFailure({FailureKind::kRankExited, RankExitDetail(rank, node_id, r)});
    case v1::RANK_PROCESS_STATE_FAILED_TO_START:
      // The agent marks what no restart can fix (a job path outside its --allowed-root, a spec it
      // cannot parse): fail now instead of spending the restart budget on the same refusal.
      if (r.failure_kind() == v1::FAILURE_KIND_DETERMINISTIC_STARTUP) {
        return HandleFailure(
            {FailureKind::kDeterministicStartup, RankExitDetail(rank, node_id, r)});
      }
      return HandleFailure({FailureKind::kRankExited, RankExitDetail(rank, node_id, r)});
    case v1::RANK_PROCESS_STATE_SIGNALED:
      // A fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE) before any rank of the generation reported a
      // step is taken for the job's own (a model or data file the trainer crashes on, issue #31):
      // the job fails at the first one instead of crashing again on every restart. SIGKILL and
      // SIGABRT (the OOM killer, an operator, an abort after a lost peer) still restart.
      if (!progressed_ && IsFaultSignal(r.signal())) {
        return HandleFailure(
            {FailureKind::kDeterministicStartup,
             absl::StrCat(RankExitDetail(rank, node_id, r),
                          " before the first step; a crash there recurs on every restart, so the "
                          "job is not restarted")});
      }
      return HandleFailure({FailureKind::kRankExited, RankExitDetail(rank, node_id, r)});
    default:  // STOPPED (on our command) or unknown: nothing to do
      return absl::OkStatus();
  }
}

absl::Status JobManager::OnCommandError(std::string_view node_id, uint64_t command_id,
                                        std::string_view error) {
  auto it = start_commands_.find(command_id);
  if (it == start_commands_.end() || it->second != node_id) return absl::OkStatus();
  return HandleFailure({FailureKind::kRankExited,
                        absl::StrCat("node ", ToAbsl(node_id), " refused to start generation ",
                                     generation(), ": ", EscapeControlCharacters(error))});
}

absl::Status JobManager::Cancel(std::string_view reason) {
  if (terminal()) return absl::OkStatus();
  if (state_.phase() == JobPhase::kRunning) {
    StopParticipants(
        generation(),
        reason.empty() ? std::string("cancelled") : absl::StrCat("cancelled: ", ToAbsl(reason)),
        {});
  }
  return Finish(state_.Cancel(reason));
}

std::optional<StallDiagnosis> JobManager::Stall() const {
  if (state_.phase() != JobPhase::kRunning || ranks_.empty()) return std::nullopt;
  std::vector<RankTrace> traces;
  traces.reserve(ranks_.size());
  for (const RankState& r : ranks_) traces.push_back(r.trace);
  return DiagnoseStall(traces, clock_.Now(), options_.stall_after);
}

std::string JobManager::StallAtFailure() const {
  if (!held_up_) return "";
  std::string out =
      absl::StrCat("before the failure, rank(s) ", FormatRankList(held_up_->waiting),
                   " waited inside collective #", held_up_->seq, " (", held_up_->op,
                   ") that rank(s) ", FormatRankList(held_up_->missing), " had not entered");
  if (!held_up_->stopped.empty()) {
    absl::StrAppend(&out, "; rank(s) ", FormatRankList(held_up_->stopped), " stopped (SIGSTOP)");
  }
  return out;
}

void JobManager::ObserveStall() {
  std::optional<StallDiagnosis> stall = Stall();
  if (!stall) {
    if (held_up_) {
      const bool resolved =
          std::all_of(held_up_->missing.begin(), held_up_->missing.end(), [&](int r) {
            const RankTrace& t = ranks_[static_cast<size_t>(r)].trace;
            return t.has_trace && !t.process_stopped && t.collective_seq >= held_up_->seq;
          });
      if (resolved) held_up_.reset();
    }
    return;
  }
  held_up_ = stall;
  if (stall->seq == logged_stall_seq_) return;
  logged_stall_seq_ = stall->seq;
  LogWarning(absl::StrCat(
      "job ", id(), ": generation ", generation(), " stalled: rank(s) ",
      FormatRankList(stall->missing), " have not entered collective #", stall->seq, " (", stall->op,
      "); rank(s) ", FormatRankList(stall->waiting), " waited ",
      absl::FormatDuration(absl::Trunc(stall->waited, absl::Milliseconds(100))), " inside it"));
}

v1::JobStatus JobManager::Status() {
  v1::JobStatus s;
  s.set_job_id(record_.id);
  s.set_name(record_.name);
  s.set_phase(PhaseToProto(state_.phase()));
  s.set_generation(generation());
  s.set_step(step_);
  s.set_total_steps(total_steps_);
  s.set_loss(loss_);
  s.set_restarts(static_cast<uint32_t>(state_.restarts()));
  s.set_max_restarts(static_cast<uint32_t>(state_.max_restarts()));
  s.set_error(state_.error());
  s.set_last_failure(FailureKindToProto(state_.snapshot().last_failure));
  s.set_committed_step(record_.committed_step);
  SetTimestamp(record_.created_at, s.mutable_created_at());
  SetTimestamp(record_.updated_at, s.mutable_updated_at());
  if (plan_) {
    s.set_world_size(static_cast<uint32_t>(plan_->world_size));
    s.set_num_nodes(static_cast<uint32_t>(plan_->nodes.size()));
    for (const std::string& w : plan_->warnings) s.add_warnings(w);
  }
  if (state_.phase() == JobPhase::kRunning) {
    const double sps = SamplesPerSecond();
    s.set_samples_per_second(sps);
    const int global_batch = requirements_ ? requirements_->spec.train.global_batch_size : 0;
    if (sps > 0 && global_batch > 0 && total_steps_ > step_) {
      const double seconds = static_cast<double>(total_steps_ - step_) * global_batch / sps;
      SetDuration(absl::Seconds(seconds), s.mutable_eta());
    }
    if (std::optional<StallDiagnosis> stall = Stall()) StallToProto(*stall, s.mutable_stall());
    if (std::optional<std::vector<double>> scores = stragglers_.Scores()) {
      for (size_t r = 0; r < scores->size(); ++r) {
        v1::RankStraggler* out = s.add_stragglers();
        out->set_rank(static_cast<uint32_t>(r));
        out->set_seconds_per_step((*scores)[r]);
      }
    }
  }
  if (state_.phase() == JobPhase::kRendezvous && rendezvous_) {
    const RendezvousStatus& rs = rendezvous_->Poll();
    v1::RendezvousStatus* out = s.mutable_rendezvous();
    for (const std::string& n : rs.joined) out->add_joined_node_ids(n);
    out->set_min_nodes(static_cast<uint32_t>(rendezvous_->options().min_nodes));
    out->set_max_nodes(static_cast<uint32_t>(rendezvous_->options().max_nodes));
    out->set_missing_for_min(static_cast<uint32_t>(rs.missing_for_min));
    SetTimestamp(rs.join_deadline, out->mutable_join_deadline());
    if (rs.last_call_deadline)
      SetTimestamp(*rs.last_call_deadline, out->mutable_last_call_deadline());
  }
  return s;
}

}  // namespace ringmaster::coordinator
