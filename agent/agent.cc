#include "agent/agent.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/node_identity.h"
#include "agent/wire_text.h"
#include "common/log.h"
#include "google/protobuf/util/time_util.h"

namespace ringmaster::agent {
namespace {

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// The coordinator refuses a message over 4 MiB and drops the stream that carried it; a report
// stays under this (log answers are what can make one large: up to 1 MiB each).
constexpr size_t kMaxReportBytes = size_t{3} << 20;

// Equal jitter: between half of `d` and `d`, so that agents cut off together do not all come
// back in the same instant.
absl::Duration Jittered(absl::Duration d) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> half(0.5, 1.0);
  return d * half(rng);
}

}  // namespace

Agent::Agent(AgentOptions options, CoordinatorLink* link, RankSupervisor* ranks, Clock now)
    : options_(std::move(options)),
      link_(link),
      ranks_(ranks),
      now_(std::move(now)),
      heartbeat_(options_.default_heartbeat) {
  if (!options_.identity_file.empty()) {
    std::string why;
    if (std::optional<NodeIdentity> id =
            LoadNodeIdentity(options_.identity_file, options_.inventory.node_name(), &why)) {
      node_id_ = id->node_id;
      node_secret_ = id->secret;
      LogInfo(absl::StrCat("registering as node ", node_id_, " again (identity from ",
                           options_.identity_file, ")"));
    } else if (!why.empty()) {
      LogWarning(absl::StrCat("node identity: ", why));
    }
  }
}

absl::Status Agent::Connect() {
  stream_.reset();
  v1::RegisterRequest req;
  req.mutable_agent_version()->set_major(1);
  req.mutable_agent_version()->set_minor(0);
  req.mutable_agent_version()->set_build(options_.build);
  *req.mutable_inventory() = options_.inventory;
  req.set_previous_node_id(node_id_);
  req.set_previous_node_secret(node_secret_);
  SanitizeOnce(&req, "registration");
  absl::StatusOr<v1::RegisterResponse> resp = link_->Register(req);
  if (!resp.ok()) return resp.status();
  if (resp->node_id().empty()) return absl::InternalError("Register returned no node id");
  node_id_ = resp->node_id();
  node_secret_ = resp->node_secret();
  if (!options_.identity_file.empty()) {
    if (absl::Status st = SaveNodeIdentity(options_.identity_file, options_.inventory.node_name(),
                                           {node_id_, node_secret_});
        !st.ok()) {
      LogWarning(
          absl::StrCat("cannot keep the node identity (an agent restart will need "
                       "`ringmaster nodes forget`): ",
                       st.message()));
    }
  }
  const absl::Duration hb = FromProto(resp->heartbeat_interval());
  if (hb > absl::ZeroDuration()) heartbeat_ = std::max(hb, absl::Milliseconds(50));
  absl::StatusOr<std::unique_ptr<HeartbeatStream>> s = link_->OpenHeartbeat();
  if (!s.ok()) return s.status();
  stream_ = *std::move(s);
  seq_ = 0;
  // The first message opens the stream for this node and reports the ranks that kept running.
  if (!SendReport()) {
    absl::Status why = stream_->Status();
    stream_.reset();
    return why.ok() ? absl::UnavailableError("heartbeat stream broke at once") : why;
  }
  return absl::OkStatus();
}

void Agent::Handle(const v1::CoordinatorMessage& msg) {
  if (msg.has_heartbeat_interval()) {
    const absl::Duration hb = FromProto(msg.heartbeat_interval());
    if (hb > absl::ZeroDuration()) heartbeat_ = std::max(hb, absl::Milliseconds(50));
  }
  const absl::Time now = now_();
  absl::Status outcome;
  bool done = true;
  switch (msg.command_case()) {
    case v1::CoordinatorMessage::kStartRanks: {
      absl::StatusOr<bool> r = ranks_->Start(msg.command_id(), msg.start_ranks(), now);
      outcome = r.status();
      done = !r.ok() || *r;
      if (r.ok()) {
        LogInfo(absl::StrCat("job ", msg.start_ranks().job_id(), " generation ",
                             msg.start_ranks().generation(), ": ",
                             *r ? "started " : "will start (older ranks stopping) ",
                             msg.start_ranks().ranks_size(), " rank(s)"));
      }
      break;
    }
    case v1::CoordinatorMessage::kStopRanks:
      outcome = ranks_->Stop(msg.stop_ranks(), now);
      LogInfo(absl::StrCat("job ", msg.stop_ranks().job_id(), ": stopping ranks up to generation ",
                           msg.stop_ranks().generation(), " (", msg.stop_ranks().reason(), ")"));
      break;
    case v1::CoordinatorMessage::kRestartRank:
      outcome = ranks_->Restart(msg.restart_rank(), now);
      break;
    case v1::CoordinatorMessage::kSendLogs:
      logs_.push_back(ranks_->LogTail(msg.command_id(), msg.send_logs()));
      break;
    case v1::CoordinatorMessage::COMMAND_NOT_SET:
      return;  // a message without a command (interval change)
  }
  if (!outcome.ok())
    LogWarning(absl::StrCat("command ", msg.command_id(), ": ", outcome.message()));
  if (!done) return;
  report_now_ = true;
  if (outcome.ok()) {
    acks_.push_back(msg.command_id());
  } else {
    v1::CommandError e;
    e.set_command_id(msg.command_id());
    e.set_error(std::string(outcome.message()));
    errors_.push_back(std::move(e));
  }
}

bool Agent::SendReport() {
  const absl::Time now = now_();
  v1::AgentMessage m;
  m.set_node_id(node_id_);
  m.set_seq(++seq_);
  // The first message opens the stream: the coordinator checks the registration's secret there.
  if (seq_ == 1) m.set_node_secret(node_secret_);
  *m.mutable_sent_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now));
  std::vector<v1::RankProgress> reports = ranks_->Report(now);
  for (const v1::RankProgress& r : reports) *m.add_ranks() = r;
  for (uint64_t id : acks_) m.add_acked_command_ids(id);
  for (const v1::CommandError& e : errors_) *m.add_command_errors() = e;
  for (const v1::LogTail& t : logs_) *m.add_logs() = t;
  // A message the coordinator cannot take would cost the stream, and the same message would be
  // sent again on the next one (issue #31): text is made valid, oversized log answers dropped.
  SanitizeOnce(&m, "report");
  if (m.ByteSizeLong() > kMaxReportBytes) {
    for (v1::LogTail& t : *m.mutable_logs()) {
      if (t.data().empty()) continue;
      t.set_error(absl::StrCat("the log answer (", t.data().size(),
                               " bytes) was dropped: the agent's report would exceed the "
                               "coordinator's message limit"));
      t.clear_data();
    }
    if (!warned_oversized_) {
      warned_oversized_ = true;
      LogWarning(
          "a report would have exceeded the coordinator's message limit: its log answers "
          "were dropped (logged once)");
    }
  }
  const bool written = stream_->Write(m);
  if (metrics_ != nullptr) {
    metrics_->Publish(AgentSnapshot{written, CountRankStates(reports), ranks_->launches(),
                                    ranks_->StatusSources()});
  }
  if (!written) return false;
  acks_.clear();
  errors_.clear();
  logs_.clear();
  last_report_ = now;
  report_now_ = false;
  return true;
}

void Agent::SanitizeOnce(google::protobuf::Message* msg, const char* what) {
  const size_t n = SanitizeStringFields(msg);
  if (n == 0 || warned_sanitised_) return;
  warned_sanitised_ = true;
  LogWarning(absl::StrCat("a ", what, " carried ", n,
                          " text field(s) with invalid UTF-8 or control characters: sent "
                          "escaped (logged once)"));
}

bool Agent::Step(absl::Duration wait) {
  if (!stream_) return false;
  const absl::Time now = now_();
  absl::Duration until_report = last_report_ + heartbeat_ - now;
  if (until_report < absl::ZeroDuration()) until_report = absl::ZeroDuration();
  absl::Duration first_wait = std::min(wait, until_report);
  for (std::optional<v1::CoordinatorMessage> m = stream_->Read(first_wait); m;
       m = stream_->Read(absl::ZeroDuration())) {
    Handle(*m);
  }
  if (ranks_->Tick(now_())) report_now_ = true;
  for (auto& [id, status] : ranks_->TakeDeferredOutcomes()) {
    report_now_ = true;
    if (status.ok()) {
      acks_.push_back(id);
    } else {
      v1::CommandError e;
      e.set_command_id(id);
      e.set_error(std::string(status.message()));
      errors_.push_back(std::move(e));
    }
  }
  if (stream_->Broken()) {
    LogWarning(absl::StrCat("lost the coordinator: ", stream_->Status().message(),
                            "; ranks keep running"));
    if (metrics_ != nullptr) metrics_->SetConnected(false);
    stream_.reset();
    return false;
  }
  if (report_now_ || now_() - last_report_ >= heartbeat_) {
    if (!SendReport()) {
      stream_.reset();
      return false;
    }
  }
  return true;
}

absl::Duration Agent::RetryDelay(const absl::Status& why, absl::Duration backoff) {
  const bool unreachable = absl::IsUnavailable(why) || absl::IsDeadlineExceeded(why);
  if (!unreachable || backoff <= options_.unreachable_retry_max) return backoff;
  // Jittered, so that the agents of a restarted coordinator do not all call at once.
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  return options_.unreachable_retry_max * jitter(rng_);
}

void Agent::Run(const std::atomic<bool>* stop) {
  absl::Duration backoff = options_.backoff_min;        // after a failed Connect
  absl::Duration break_backoff = options_.backoff_min;  // after a stream that broke soon
  const absl::Duration tick = absl::Milliseconds(200);
  // Keeps supervising the ranks while waiting to reconnect.
  auto supervise_for = [&](absl::Duration d) {
    const absl::Time until = now_() + d;
    while (!stop->load() && now_() < until) {
      ranks_->Tick(now_());
      sleep_(absl::Milliseconds(100));
    }
  };
  absl::Time connected_at = absl::InfinitePast();
  while (!stop->load()) {
    if (!stream_) {
      absl::Status s = Connect();
      if (!s.ok()) {
        const absl::Duration d = RetryDelay(s, Jittered(backoff));
        LogWarning(absl::StrCat("cannot reach the coordinator: ", s.message(), "; retrying in ",
                                absl::FormatDuration(d)));
        supervise_for(d);
        backoff = std::min(backoff * 2, options_.backoff_max);
        continue;
      }
      LogInfo(absl::StrCat("registered as node ", node_id_, " (heartbeat every ",
                           absl::FormatDuration(heartbeat_), ")"));
      backoff = options_.backoff_min;
      connected_at = now_();
    }
    if (Step(tick)) continue;
    // The stream broke. After a stream that lived a while, reconnect at once; a stream that
    // keeps breaking soon after it opened waits longer each time (issue #31: a report the
    // coordinator could not read once made the agent re-register ~390 times a second).
    // Counted apart from failed Connects, so that a coordinator outage does not lengthen it.
    if (now_() - connected_at >= options_.stable_after) {
      break_backoff = options_.backoff_min;
      continue;
    }
    const absl::Duration d = Jittered(break_backoff);
    LogWarning(absl::StrCat("the heartbeat stream broke ",
                            absl::FormatDuration(now_() - connected_at),
                            " after it opened; registering again in ", absl::FormatDuration(d)));
    supervise_for(d);
    break_backoff = std::min(break_backoff * 2, options_.backoff_max);
  }
  ranks_->StopAll(options_.shutdown_grace, now_());
  while (ranks_->LiveRanks() > 0) {
    if (ranks_->Tick(now_()) && stream_ && !stream_->Broken()) SendReport();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace ringmaster::agent
