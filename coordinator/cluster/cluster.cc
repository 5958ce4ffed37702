// Cluster: nodes, jobs and the scheduling between them.
#include "coordinator/cluster/cluster.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/absl_view.h"
#include "common/log.h"
#include "common/log_escape.h"
#include "coordinator/cluster/api_version.h"
#include "coordinator/cluster/node_secret.h"
#include "coordinator/cluster/proto_convert.h"
#include "coordinator/cluster/register_limits.h"
#include "coordinator/plan/job_requirements.h"

namespace ringmaster::coordinator {
namespace {

constexpr uint32_t kDefaultPageSize = 100;

bool LiveRankState(v1::RankProcessState s) {
  return s == v1::RANK_PROCESS_STATE_STARTING || s == v1::RANK_PROCESS_STATE_RUNNING;
}

void LogIfError(const absl::Status& st, std::string_view what) {
  if (!st.ok()) LogWarning(absl::StrCat(ToAbsl(what), ": ", st.ToString()));
}

constexpr size_t kMaxNodeNameLength = 128;

// See Cluster::CountStreamBreak. An agent reconnects at once after a stream that lived a while
// and backs off after one that broke soon (agent.h), so a healthy node reaches this only when its
// link fails several times a minute.
constexpr size_t kMaxStreamBreaks = 5;
constexpr absl::Duration kStreamBreakWindow = absl::Seconds(60);

// Caps on the free-text fields of requests (issue #20): each is stored, logged or echoed, so an
// authenticated caller must not be able to grow the database or the log by megabytes per call.
// (job_yaml has its own cap, kMaxJobYamlBytes, in ParseJobRequirements.)
constexpr size_t kMaxRequestIdBytes = 128;
constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX
constexpr size_t kMaxShortTextBytes = 256;
constexpr size_t kMaxReasonBytes = 1024;

// InvalidArgument naming `what` and the limit when `value` is longer than `max` bytes or holds a
// control character (NUL included: it would cut a path short in the trainer's C calls).
absl::Status CheckTextField(std::string_view what, std::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " is ", value.size(), " bytes; at most ", max, " are accepted"));
  }
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(what), " holds a control character (byte 0x",
                       absl::Hex(u, absl::kZeroPad2), "); none are accepted"));
    }
  }
  return absl::OkStatus();
}

// The job-name rule (jobspec ValidName) for node names too: they reach logs, terminals, metric
// labels and rank environments.
bool ValidNodeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameLength || !absl::ascii_isalnum(name[0])) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

Cluster::Cluster(const ClusterOptions& options, JobDb& db, const Clock& clock)
    : options_(options),
      db_(db),
      clock_(clock),
      command_ids_(std::make_shared<std::atomic<uint64_t>>(0)),
      started_at_(clock.Now()) {}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const ClusterOptions& options, JobDb& db,
                                                         const Clock& clock) {
  if (options.lost_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("cluster: lost_after must be positive");
  }
  std::unique_ptr<Cluster> c(new Cluster(options, db, clock));
  if (absl::Status st = c->Load(); !st.ok()) return st;
  return c;
}

absl::Status Cluster::Load() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<NodeRecord>> nodes = db_.ListNodes();
  if (!nodes.ok()) return nodes.status();
  for (NodeRecord& r : *nodes) {
    Node& n = AddNode(r.node_id);
    n.inventory = InventoryToProto(r.inventory);
    node_by_name_[n.inventory.node_name()] = n.node_id;
    n.registered_at = r.registered_at;
    n.last_heartbeat_at = r.last_seen_at;
    n.secret_sha256 = r.secret_sha256;
    uint64_t number = 0;
    if (absl::SimpleAtoi(absl::string_view(r.node_id).substr(5), &number)) {
      next_node_number_ = std::max(next_node_number_, number + 1);
    }
  }
  absl::StatusOr<std::vector<JobRecord>> jobs = db_.ListJobs();
  if (!jobs.ok()) return jobs.status();
  for (JobRecord& r : *jobs) {
    const std::string id = r.id;
    absl::StatusOr<std::unique_ptr<JobManager>> m =
        JobManager::Restore(std::move(r), options_.windows, options_.job, db_, clock_);
    if (!m.ok()) return m.status();
    job_index_[id] = jobs_.size();
    jobs_.push_back(*std::move(m));
  }
  if (!nodes->empty() || !jobs->empty()) {
    LogInfo(absl::StrCat("restored ", nodes->size(), " nodes and ", jobs->size(), " jobs from ",
                         db_.path()));
  }
  Schedule();
  return absl::OkStatus();
}

Cluster::Node* Cluster::FindNode(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

JobManager* Cluster::FindJob(const std::string& job_id) {
  auto it = job_index_.find(job_id);
  return it == job_index_.end() ? nullptr : jobs_[it->second].get();
}

JobManager* Cluster::JobHolding(const std::string& node_id) {
  for (auto& job : jobs_) {
    if (job->terminal()) continue;
    for (const std::string& n : job->nodes()) {
      if (n == node_id) return job.get();
    }
  }
  return nullptr;
}

Cluster::Node& Cluster::AddNode(std::string node_id) {
  Node& n = nodes_[node_id];
  n.node_id = std::move(node_id);
  n.outbox = std::make_shared<AgentOutbox>(command_ids_);
  return n;
}

std::string Cluster::NewNodeId() { return absl::StrFormat("node-%06d", next_node_number_++); }

// ---- Coordinator service

absl::StatusOr<v1::SubmitJobResponse> Cluster::SubmitJob(const v1::SubmitJobRequest& request) {
  if (absl::Status st = CheckPeerVersion(request.client_version(), "client"); !st.ok()) return st;
  absl::Status fields =
      CheckTextField("submit: request_id", request.request_id(), kMaxRequestIdBytes);
  if (fields.ok()) fields = CheckTextField("submit: base_dir", request.base_dir(), kMaxPathBytes);
  if (fields.ok()) fields = CheckTextField("submit: source", request.source(), kMaxShortTextBytes);
  if (!fields.ok()) return fields;
  absl::MutexLock lock(&mu_);
  v1::SubmitJobResponse response;
  if (!request.request_id().empty()) {
    absl::StatusOr<JobRecord> existing = db_.FindJobByRequestId(request.request_id());
    if (existing.ok()) {
      JobManager* job = FindJob(existing->id);
      if (job == nullptr) return absl::InternalError("job " + existing->id + " is not loaded");
      response.set_job_id(job->id());
      *response.mutable_status() = StatusOf(*job);
      return response;
    }
    if (!absl::IsNotFound(existing.status())) return existing.status();
  }
  absl::StatusOr<JobRequirements> req = ParseJobRequirements(request.job_yaml(), request.source(),
                                                             request.base_dir(), options_.windows);
  if (!req.ok()) {
    // The error may quote the job file (a key, a value): echoed with its control characters
    // escaped (common/log_escape.h), like everything a client prints.
    return absl::Status(req.status().code(),
                        EscapeControlCharacters(std::string(req.status().message())));
  }

  JobRecord record;
  record.name = req->spec.name;
  record.spec_yaml = request.job_yaml();
  record.base_dir = request.base_dir();
  record.request_id = request.request_id();
  record.max_restarts = req->max_restarts;
  absl::StatusOr<JobRecord> stored = db_.CreateJob(record);
  if (!stored.ok()) return stored.status();
  LogInfo(absl::StrCat("job ", stored->id, " (", stored->name, ") submitted"));
  absl::StatusOr<std::unique_ptr<JobManager>> m =
      JobManager::Create(*std::move(stored), *std::move(req), options_.job, db_, clock_);
  if (!m.ok()) return m.status();
  JobManager* job = m->get();
  job_index_[job->id()] = jobs_.size();
  jobs_.push_back(*std::move(m));
  Schedule();
  response.set_job_id(job->id());
  *response.mutable_status() = StatusOf(*job);
  return response;
}

v1::JobStatus Cluster::StatusOf(JobManager& job) {
  v1::JobStatus s = job.Status();
  if (s.has_rendezvous() && s.rendezvous().missing_for_min() > 0) {
    s.mutable_rendezvous()->set_free_nodes(static_cast<uint32_t>(free_nodes_));
  }
  return s;
}

absl::StatusOr<v1::JobStatus> Cluster::GetJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  JobManager* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  return StatusOf(*job);
}

absl::StatusOr<v1::ListJobsResponse> Cluster::ListJobs(const v1::ListJobsRequest& request) {
  size_t offset = 0;
  if (!request.page_token().empty() && !absl::SimpleAtoi(request.page_token(), &offset)) {
    return absl::InvalidArgumentError(absl::StrCat("bad page_token '", request.page_token(), "'"));
  }
  const uint32_t page = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  absl::MutexLock lock(&mu_);
  v1::ListJobsResponse response;
  constexpr size_t kMaxJobsPageBytes = size_t{2} << 20;
  size_t seen = 0, bytes = 0;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    v1::JobStatus s = StatusOf(**it);
    if (!request.phases().empty() && std::find(request.phases().begin(), request.phases().end(),
                                               s.phase()) == request.phases().end()) {
      continue;
    }
    if (seen++ < offset) continue;
    // Cut before the page would pass kMaxJobsPageBytes, like ListNodes: under the client's limit.
    const size_t size = s.ByteSizeLong() + 8;
    if (static_cast<uint32_t>(response.jobs_size()) == page ||
        (response.jobs_size() > 0 && bytes + size > kMaxJobsPageBytes)) {
      response.set_next_page_token(absl::StrCat(offset + response.jobs_size()));
      break;
    }
    bytes += size;
    *response.add_jobs() = std::move(s);
  }
  return response;
}

absl::StatusOr<v1::JobStatus> Cluster::CancelJob(const v1::CancelJobRequest& request) {
  if (absl::Status st = CheckTextField("cancel: reason", request.reason(), kMaxReasonBytes);
      !st.ok()) {
    return st;
  }
  absl::MutexLock lock(&mu_);
  JobManager* job = FindJob(request.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
  if (absl::Status st = job->Cancel(request.reason()); !st.ok()) return st;
  Schedule();
  return job->Status();
}

std::vector<const Cluster::Node*> Cluster::NodesByName() const {
  std::vector<const Node*> sorted;
  sorted.reserve(nodes_.size());
  for (const auto& [id, n] : nodes_) sorted.push_back(&n);
  std::sort(sorted.begin(), sorted.end(), [](const Node* a, const Node* b) {
    return std::tie(a->inventory.node_name(), a->node_id) <
           std::tie(b->inventory.node_name(), b->node_id);
  });
  return sorted;
}

void Cluster::FillNodeInfo(const Node& n, v1::NodeInfo* info) {
  info->set_node_id(n.node_id);
  *info->mutable_inventory() = n.inventory;
  JobManager* job = JobHolding(n.node_id);
  info->set_state(StateOf(n, job != nullptr));
  if (job != nullptr) info->set_job_id(job->id());
  SetTimestamp(n.registered_at, info->mutable_registered_at());
  SetTimestamp(n.last_heartbeat_at, info->mutable_last_heartbeat_at());
  *info->mutable_agent_version() = n.agent_version;
}

v1::ListNodesResponse Cluster::ListNodes() {
  absl::MutexLock lock(&mu_);
  v1::ListNodesResponse response;
  for (const Node* n : NodesByName()) FillNodeInfo(*n, response.add_nodes());
  return response;
}

absl::StatusOr<v1::ListNodesResponse> Cluster::ListNodes(const v1::ListNodesRequest& request) {
  constexpr uint32_t kDefaultPage = 500, kMaxPage = 1000;
  // Well under gRPC's default 4 MiB limit on a received message (issue #20: 2000 nodes made one
  // 8 MB response that no client could read).
  constexpr size_t kMaxPageBytes = size_t{2} << 20;
  const uint32_t limit =
      request.page_size() == 0 ? kDefaultPage : std::min(request.page_size(), kMaxPage);
  // The token is the last node sent: "<node id>/<node name>" (ids hold no '/').
  std::optional<std::pair<std::string, std::string>> after;  // (name, id)
  if (!request.page_token().empty()) {
    const std::string& t = request.page_token();
    const size_t slash = t.find('/');
    if (t.size() > 512 || slash == std::string::npos || !absl::StartsWith(t, "node-")) {
      return absl::InvalidArgumentError("ListNodes: page_token is not one this coordinator gave");
    }
    after.emplace(t.substr(slash + 1), t.substr(0, slash));
  }
  absl::MutexLock lock(&mu_);
  v1::ListNodesResponse response;
  size_t bytes = 0;
  const Node* last = nullptr;
  for (const Node* n : NodesByName()) {
    if (after &&
        std::tie(n->inventory.node_name(), n->node_id) <= std::tie(after->first, after->second)) {
      continue;
    }
    // The page is cut before a node that would take it over kMaxPageBytes (issue #31: cut only
    // after it held 2 MiB, one page reached 6.3 MB), so it stays under the client's limit.
    v1::NodeInfo info;
    FillNodeInfo(*n, &info);
    const size_t size = info.ByteSizeLong() + 8;  // + the field's tag and length
    if (static_cast<uint32_t>(response.nodes_size()) >= limit ||
        (last != nullptr && bytes + size > kMaxPageBytes)) {
      response.set_next_page_token(absl::StrCat(last->node_id, "/", last->inventory.node_name()));
      break;
    }
    *response.add_nodes() = std::move(info);
    bytes += size;
    last = n;
  }
  return response;
}

v1::NodeState Cluster::StateOf(const Node& node, bool busy) {
  return node.lost ? v1::NODE_STATE_LOST : busy ? v1::NODE_STATE_BUSY : v1::NODE_STATE_READY;
}

ClusterSnapshot Cluster::Snapshot(absl::Duration keep_ended) {
  absl::MutexLock lock(&mu_);
  ClusterSnapshot snap;
  snap.taken_at = clock_.Now();
  snap.started_at = started_at_;
  for (JobPhase p :
       {JobPhase::kPending, JobPhase::kRendezvous, JobPhase::kRunning, JobPhase::kRestarting,
        JobPhase::kSucceeded, JobPhase::kFailed, JobPhase::kCancelled}) {
    snap.jobs_per_phase[p] = 0;
  }
  absl::flat_hash_set<std::string> busy;
  for (auto& job : jobs_) {
    ++snap.jobs_per_phase[job->phase()];
    for (const absl::Duration d : job->rendezvous_durations()) snap.rendezvous.push_back(d);
    if (job->terminal()) {
      if (snap.taken_at - job->record().updated_at > keep_ended) continue;
    } else {
      for (std::string& n : job->nodes()) busy.insert(std::move(n));
    }
    snap.jobs.push_back({job->Status(), job->last_rendezvous()});
  }
  for (const auto& [id, n] : nodes_) {
    ClusterSnapshot::Node& out = snap.nodes.emplace_back();
    out.name = n.inventory.node_name().empty() ? id : n.inventory.node_name();
    out.state = StateOf(n, busy.contains(id));
    out.heartbeat_age = snap.taken_at - n.last_heartbeat_at;
    out.samples_per_second = n.inventory.trainer_samples_per_second();
  }
  std::sort(snap.nodes.begin(), snap.nodes.end(),
            [](const ClusterSnapshot::Node& a, const ClusterSnapshot::Node& b) {
              return a.name < b.name;
            });
  return snap;
}

// ---- Agent service

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

void Cluster::Tick() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  for (auto& [id, node] : nodes_) {
    if (!node.lost && now - node.last_heartbeat_at >= options_.lost_after) {
      NodeLost(node, absl::StrCat("no heartbeat for ",
                                  absl::FormatDuration(now - node.last_heartbeat_at)));
    }
  }
  for (auto& job : jobs_) LogIfError(job->Tick(), absl::StrCat("job ", job->id()));
  ForgetLostNodes(now);
  Schedule();
}

void Cluster::ForgetLostNodes(absl::Time now) {
  if (options_.forget_lost_after <= absl::ZeroDuration()) return;
  std::vector<std::string> forgotten;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    Node& node = it->second;
    // Silent since its last heartbeat, but never counted from before this coordinator started:
    // a restart after a long outage gives every agent the whole window to reconnect (and the
    // database's last_seen_at is the registration time). A node some job still counts on stays
    // until that job has moved on.
    const absl::Duration silent = now - std::max(node.last_heartbeat_at, started_at_);
    const bool forget = node.lost && silent >= options_.forget_lost_after &&
                        !node.outbox->attached() && JobHolding(node.node_id) == nullptr;
    if (!forget) {
      ++it;
      continue;
    }
    // A flood of registrations expires as one: the first few are named, the rest counted.
    if (forgotten.size() < 10) {
      LogInfo(absl::StrCat("node ", node.node_id, " (", node.inventory.node_name(),
                           ") forgotten: lost for ", absl::FormatDuration(silent),
                           " (--forget-lost-after ",
                           absl::FormatDuration(options_.forget_lost_after), ")"));
    }
    forgotten.push_back(node.node_id);
    auto by_name = node_by_name_.find(node.inventory.node_name());
    if (by_name != node_by_name_.end() && by_name->second == node.node_id) {
      node_by_name_.erase(by_name);
    }
    it = nodes_.erase(it);
  }
  if (forgotten.size() > 10) {
    LogInfo(absl::StrCat(forgotten.size() - 10, " more lost nodes forgotten"));
  }
  // One transaction for all of them: the lock is held meanwhile.
  LogIfError(db_.DeleteNodes(forgotten), "forgetting lost nodes");
}

void Cluster::OfferFreeNodes() {
  absl::flat_hash_set<std::string> busy;
  for (auto& job : jobs_) {
    if (job->terminal()) continue;
    for (std::string& n : job->nodes()) busy.insert(std::move(n));
  }
  // A node whose stream closed is not offered to a rendezvous until it reconnects: its agent may
  // be dead, and the lost-after window has not yet said so.
  std::vector<Node*> free;
  for (auto& [id, node] : nodes_) {
    if (!node.lost && node.outbox->attached() && !busy.contains(id)) free.push_back(&node);
  }
  std::sort(free.begin(), free.end(), [](const Node* a, const Node* b) {
    return std::tie(a->inventory.node_name(), a->node_id) <
           std::tie(b->inventory.node_name(), b->node_id);
  });
  size_t next = 0;
  for (auto& job : jobs_) {
    // A job takes nodes only once its minimum can start: one that needs more nodes than are free
    // now takes none, so that it does not keep them from later jobs while it waits (issue #31: a
    // `nodes: 50` job held a one-node cluster's node for its whole join timeout). It takes them
    // when enough are free at once, or fails at its join timeout naming the shortfall.
    const size_t missing = static_cast<size_t>(job->NodesMissingForMin());
    if (missing > free.size() - next) continue;
    while (next < free.size() && job->AcceptingNodes()) {
      Node* n = free[next++];
      PlanNode pn;
      pn.node_id = n->node_id;
      pn.inventory = InventoryFromProto(n->inventory);
      LogIfError(job->Join(pn, n->outbox), absl::StrCat("job ", job->id()));
    }
  }
  free_nodes_ = free.size() - next;
}

void Cluster::Schedule() {
  // Offering nodes scans and sorts every node: only when some job is gathering them (this runs on
  // every agent message; at 4096 nodes the scan made each heartbeat cost ~15 ms).
  const bool gathering = std::any_of(jobs_.begin(), jobs_.end(), [](auto& job) {
    return !job->terminal() && job->AcceptingNodes();
  });
  if (gathering) OfferFreeNodes();
  if (!gathering) free_nodes_ = 0;
  ++version_;
}

// ---- Watching

uint64_t Cluster::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

void Cluster::WaitForChange(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ != seen || shutdown_; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
}

void Cluster::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

bool Cluster::shutting_down() {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

}  // namespace ringmaster::coordinator
