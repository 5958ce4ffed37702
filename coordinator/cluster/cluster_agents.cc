// Cluster, the agents' side: registration (a known node name needs its secret), heartbeat
// streams, the agents' reports, forgetting a node, log requests answered only by the node asked.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/log_escape.h"
#include "coordinator/cluster/api_version.h"
#include "coordinator/cluster/cluster.h"
#include "coordinator/cluster/cluster_internal.h"
#include "coordinator/cluster/node_secret.h"
#include "coordinator/cluster/proto_convert.h"
#include "coordinator/cluster/register_limits.h"

namespace ringmaster::coordinator {

using namespace cluster_internal;  // NOLINT(build/namespaces): the library's own helpers

absl::StatusOr<v1::RegisterResponse> Cluster::Register(const v1::RegisterRequest& request) {
  if (absl::Status st = CheckPeerVersion(request.agent_version(), "agent"); !st.ok()) return st;
  if (absl::Status st = CheckRegisterLimits(request); !st.ok()) return st;
  const v1::NodeInventory& inv = request.inventory();
  if (inv.node_name().empty()) return absl::InvalidArgumentError("register: empty node_name");
  if (!ValidNodeName(inv.node_name())) {
    // The name itself is not echoed: it may carry the control characters refused here.
    return absl::InvalidArgumentError(absl::StrCat(
        "register: node_name (", inv.node_name().size(), " bytes) must be 1-", kMaxNodeNameLength,
        " letters, digits, '-', '_' or '.', starting with a letter or digit"));
  }
  if (absl::Status st = CheckTextField("register: hostname", inv.hostname(), kMaxShortTextBytes);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckTextField("register: rack", inv.rack(), kMaxShortTextBytes);
      !st.ok()) {
    return st;
  }
  if (inv.addresses_size() > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: ", inv.addresses_size(), " addresses; at most 16 are accepted"));
  }
  for (const std::string& a : inv.addresses()) {
    if (absl::Status st = CheckTextField("register: address", a, kMaxShortTextBytes); !st.ok()) {
      return st;
    }
  }
  if (inv.addresses().empty() && inv.hostname().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("register: node ", inv.node_name(), " has neither addresses nor a hostname"));
  }
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  Node* node = FindNode(request.previous_node_id());
  if (node != nullptr && node->inventory.node_name() != inv.node_name()) node = nullptr;
  if (node == nullptr) {
    if (auto it = node_by_name_.find(inv.node_name()); it != node_by_name_.end()) {
      node = FindNode(it->second);
    }
  }
  if (node != nullptr && !node->lost) {
    const std::string old_addr =
        node->inventory.addresses().empty() ? "" : node->inventory.addresses(0);
    const std::string new_addr = inv.addresses().empty() ? "" : inv.addresses(0);
    if (old_addr != new_addr) {
      return absl::AlreadyExistsError(
          absl::StrCat("node name ", inv.node_name(), " is registered to a live agent at ",
                       old_addr, " (", node->node_id, "); this agent is at ", new_addr));
    }
    // A connected agent keeps its node unless the caller proves it is that agent (a reconnection
    // over a stream the coordinator has not seen break yet). Anyone else holding the join token
    // could otherwise re-register the name and take the node's stream and commands.
    if (node->outbox->attached() &&
        !NodeSecretMatches(request.previous_node_secret(), node->secret_sha256)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "node ", inv.node_name(), " (", node->node_id,
          ") has a connected agent; registering it again needs that agent's node secret"));
    }
  }
  // A known name stays its agent's while that agent is away too, and across a restart of this
  // coordinator (the digest is in the database): only the secret of the node's latest
  // registration takes it back (issue #31). Without the check a join-token holder took a lost
  // node's name, id and next StartRanks (the whole job spec). A node stored without a digest
  // (none was ever given) keeps the older rule: free once no stream is attached.
  if (node != nullptr && !node->secret_sha256.empty() &&
      !NodeSecretMatches(request.previous_node_secret(), node->secret_sha256)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", inv.node_name(), " (", node->node_id, ") is registered; registering it again ",
        request.previous_node_secret().empty() ? "without" : "with a wrong",
        " node secret is refused (its agent keeps the secret in its work dir; an operator frees "
        "the name with `ringmaster nodes forget ",
        inv.node_name(), "`)"));
  }
  absl::StatusOr<std::string> secret = NewNodeSecret();
  if (!secret.ok()) return secret.status();
  if (node == nullptr) {
    node = &AddNode(NewNodeId());
    node->registered_at = now;
    LogInfo(absl::StrCat("node ", node->node_id, " (", inv.node_name(), ") registered"));
  } else {
    // A reconnection, or an agent restart: its next message tells which (see the header).
    LogInfo(absl::StrCat("node ", node->node_id, " (", inv.node_name(), ") registered again"));
    JobManager* job = JobHolding(node->node_id);
    node->verify_ranks = job != nullptr && job->phase() == JobPhase::kRunning;
    if (node->verify_ranks) CountStreamBreak(*node, *job, now);
  }
  node->inventory = inv;
  node_by_name_[inv.node_name()] = node->node_id;
  node->agent_version = request.agent_version();
  node->last_heartbeat_at = now;
  node->lost = false;
  node->stopped_up_to.clear();
  node->warned_stray_logs = false;
  node->secret_sha256 = NodeSecretDigest(*secret);
  ++node->registration;
  NodeRecord record;
  record.node_id = node->node_id;
  record.inventory = InventoryFromProto(inv);
  record.secret_sha256 = node->secret_sha256;
  LogIfError(db_.UpsertNode(record), "cannot store node");

  v1::RegisterResponse response;
  response.set_node_id(node->node_id);
  response.set_node_secret(*std::move(secret));
  SetDuration(options_.heartbeat_interval, response.mutable_heartbeat_interval());
  SetDuration(options_.lost_after, response.mutable_lost_after());
  *response.mutable_coordinator_version() = CoordinatorApiVersion();
  Schedule();
  return response;
}

absl::StatusOr<std::pair<std::shared_ptr<AgentOutbox>, uint64_t>> Cluster::AttachStream(
    const std::string& node_id, std::string_view secret) {
  absl::MutexLock lock(&mu_);
  Node* node = FindNode(node_id);
  if (node == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown node id '", node_id, "': register first"));
  }
  if (!NodeSecretMatches(secret, node->secret_sha256)) {
    return absl::PermissionDeniedError(
        absl::StrCat("heartbeat stream for node ", node_id, ": ", secret.empty() ? "no" : "a wrong",
                     " node secret (the first message must carry the one its Register returned)"));
  }
  if (node->outbox->attached() && node->stream_registration == node->registration) {
    return absl::AlreadyExistsError(
        absl::StrCat("node ", node_id,
                     " already has an open heartbeat stream for its registration; register "
                     "again to replace it"));
  }
  node->stream_registration = node->registration;
  const uint64_t epoch = node->outbox->Attach();
  Schedule();  // a node is offered to jobs once its stream is open
  return std::make_pair(node->outbox, epoch);
}

void Cluster::DetachStream(const std::string& node_id, uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (Node* node = FindNode(node_id)) node->outbox->Detach(epoch);
}

void Cluster::StopStaleRanks(Node& node, const v1::RankProgress& r, const JobManager& job) {
  if (!LiveRankState(r.state())) return;
  if (!job.terminal() && r.generation() >= job.generation()) return;
  // A StopRanks stops every generation up to its own (the agent's RankSupervisor::Stop), so one
  // per node and job covers all stale reports at or below it: a report of generation G is sent
  // one only when G is above what this node was already told. For an ended job that is every
  // generation at once, so a flood of reports with made-up generation numbers queues one
  // command, not one per number (issue #31: 1M reports queued 1M StopRanks, +350 MB).
  const int64_t up_to = job.terminal() ? std::numeric_limits<int64_t>::max() : r.generation();
  auto [it, inserted] = node.stopped_up_to.try_emplace(r.job_id(), up_to);
  if (!inserted) {
    if (it->second >= r.generation()) return;
    it->second = up_to;
  }
  v1::CoordinatorMessage msg;
  v1::StopRanks* stop = msg.mutable_stop_ranks();
  stop->set_job_id(r.job_id());
  stop->set_generation(up_to);
  SetDuration(options_.job.stop_grace, stop->mutable_grace_period());
  stop->set_reason(job.terminal()
                       ? "the job has ended"
                       : absl::StrCat("generation ", r.generation(),
                                      " is over; the job is at generation ", job.generation()));
  node.outbox->Send(std::move(msg));
}

absl::Status Cluster::OnAgentMessage(const v1::AgentMessage& message) {
  absl::MutexLock lock(&mu_);
  Node* node = FindNode(message.node_id());
  if (node == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown node id '", message.node_id(), "': register first"));
  }
  node->last_heartbeat_at = clock_.Now();
  if (node->lost) {
    node->lost = false;
    LogInfo(absl::StrCat("node ", node->node_id, " is back"));
  }
  if (node->verify_ranks) {
    node->verify_ranks = false;
    JobManager* job = JobHolding(node->node_id);
    if (job != nullptr && job->phase() == JobPhase::kRunning &&
        std::none_of(message.ranks().begin(), message.ranks().end(),
                     [&](const v1::RankProgress& r) {
                       return r.job_id() == job->id() && r.generation() == job->generation();
                     })) {
      LogIfError(job->NodeLost(node->node_id,
                               absl::StrCat("its agent registered again without the ranks of "
                                            "generation ",
                                            job->generation())),
                 absl::StrCat("job ", job->id()));
    }
  }
  for (const v1::RankProgress& r : message.ranks()) {
    JobManager* job = FindJob(r.job_id());
    if (job == nullptr) continue;
    StopStaleRanks(*node, r, *job);
    LogIfError(job->OnRankReport(node->node_id, r), absl::StrCat("job ", r.job_id()));
  }
  for (const v1::LogTail& t : message.logs()) {
    // Only the node that was asked answers: a command id alone is a counter any node can guess.
    auto it = pending_logs_.find(std::make_pair(node->node_id, t.command_id()));
    if (it != pending_logs_.end()) {
      it->second = t;
    } else if (!node->warned_stray_logs) {  // once per registration: a flood logs one line
      node->warned_stray_logs = true;
      LogWarning(absl::StrCat("node ", node->node_id, " sent a log answer (command ",
                              t.command_id(),
                              ") it was not asked for; ignored (and any more from this "
                              "registration)"));
    }
  }
  for (const v1::CommandError& e : message.command_errors()) {
    LogWarning(
        absl::StrCat("node ", node->node_id, " refused command ", e.command_id(), ": ", e.error()));
    if (JobManager* job = JobHolding(node->node_id)) {
      LogIfError(job->OnCommandError(node->node_id, e.command_id(), e.error()),
                 absl::StrCat("job ", job->id()));
    }
  }
  Schedule();
  return absl::OkStatus();
}

absl::Status Cluster::ForgetNode(const std::string& node_name) {
  absl::MutexLock lock(&mu_);
  auto by_name = node_by_name_.find(node_name);
  Node* node = by_name == node_by_name_.end() ? nullptr : FindNode(by_name->second);
  if (node == nullptr) {
    return absl::NotFoundError(absl::StrCat("forget: no node named '", node_name, "'"));
  }
  if (node->outbox->attached()) {
    return absl::FailedPreconditionError(
        absl::StrCat("forget: node ", node_name, " (", node->node_id,
                     ") has a connected agent; stop that agent first"));
  }
  if (JobManager* job = JobHolding(node->node_id)) {
    return absl::FailedPreconditionError(absl::StrCat("forget: node ", node_name, " (",
                                                      node->node_id, ") is held by job ", job->id(),
                                                      "; cancel it or wait until it ends"));
  }
  if (absl::Status st = db_.DeleteNodes({node->node_id}); !st.ok()) return st;
  LogInfo(absl::StrCat("node ", node->node_id, " (", node_name,
                       ") forgotten by an operator: its name is free to register"));
  node_by_name_.erase(by_name);
  nodes_.erase(node->node_id);
  Schedule();
  return absl::OkStatus();
}

// ---- Logs

absl::StatusOr<v1::GetLogsResponse> Cluster::GetLogs(const v1::GetLogsRequest& request,
                                                     absl::Duration timeout) {
  constexpr uint32_t kDefaultBytes = 64 << 10, kMaxBytes = 1 << 20;
  absl::MutexLock lock(&mu_);
  JobManager* job = FindJob(request.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job '", request.job_id(), "'"));
  // The rank is unsigned on the wire: checked as such (4294967295 once read as "rank -1").
  const size_t world = job->last_world_size();
  if (world == 0) {
    return absl::NotFoundError(absl::StrCat("job ", job->id(), " has no rank ", request.rank(),
                                            " in a generation this coordinator started"));
  }
  if (request.rank() >= world) {
    return absl::InvalidArgumentError(absl::StrCat("logs: rank ", request.rank(),
                                                   " is out of range: job ", job->id(),
                                                   " has ranks 0 to ", world - 1));
  }
  const int rank = static_cast<int>(request.rank());
  std::optional<std::pair<std::string, int64_t>> where = job->NodeOfRank(rank);
  if (!where || where->first.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job->id(), " has no rank ", rank,
                                            " in a generation this coordinator started"));
  }
  const std::string node_id = where->first;
  Node* node = FindNode(node_id);
  if (node == nullptr || node->lost || !node->outbox->attached()) {
    return absl::UnavailableError(absl::StrCat("rank ", rank, " of job ", job->id(),
                                               " ran on node ", node_id,
                                               ", which is not connected"));
  }
  v1::CoordinatorMessage msg;
  v1::SendLogs* send = msg.mutable_send_logs();
  send->set_job_id(job->id());
  send->set_global_rank(request.rank());
  send->set_generation(where->second);
  send->set_max_bytes(request.max_bytes() == 0 ? kDefaultBytes
                                               : std::min(request.max_bytes(), kMaxBytes));
  const std::pair<std::string, uint64_t> key(node_id, node->outbox->Send(std::move(msg)));
  pending_logs_[key] = std::nullopt;
  auto answered = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_logs_[key].has_value() || shutdown_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&answered), timeout);
  std::optional<v1::LogTail> tail = std::move(pending_logs_[key]);
  pending_logs_.erase(key);
  if (!tail) {
    return absl::DeadlineExceededError(absl::StrCat("node ", node_id, " sent no log of rank ", rank,
                                                    " within ", absl::FormatDuration(timeout)));
  }
  if (!tail->error().empty()) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, ": ", tail->error()));
  }
  v1::GetLogsResponse response;
  response.set_node_id(node_id);
  response.set_generation(tail->generation());
  response.set_data(tail->data());
  response.set_truncated(tail->truncated());
  return response;
}

// ---- Time

void Cluster::NodeLost(Node& node, std::string_view why) {
  node.lost = true;
  LogWarning(absl::StrCat("node ", node.node_id, " (", node.inventory.node_name(),
                          ") lost: ", ToAbsl(why)));
  if (JobManager* job = JobHolding(node.node_id)) {
    LogIfError(job->NodeLost(node.node_id, why), absl::StrCat("job ", job->id()));
  }
}

void Cluster::CountStreamBreak(Node& node, JobManager& job, absl::Time now) {
  std::deque<absl::Time>& breaks = node.stream_breaks;
  breaks.push_back(now);
  while (now - breaks.front() > kStreamBreakWindow) breaks.pop_front();
  if (breaks.size() < kMaxStreamBreaks) return;
  breaks.clear();
  node.verify_ranks = false;  // the generation ends here; the next one starts afresh
  LogIfError(job.NodeLost(node.node_id,
                          absl::StrCat("its heartbeat stream broke ", kMaxStreamBreaks,
                                       " times within ", absl::FormatDuration(kStreamBreakWindow),
                                       " (its agent registered again each time) while it ran "
                                       "generation ",
                                       job.generation())),
             absl::StrCat("job ", job.id()));
}

}  // namespace ringmaster::coordinator
