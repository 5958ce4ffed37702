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
#include "coordinator/cluster/cluster_internal.h"
#include "coordinator/cluster/node_secret.h"
#include "coordinator/cluster/proto_convert.h"
#include "coordinator/cluster/register_limits.h"
#include "coordinator/plan/job_requirements.h"

namespace ringmaster::coordinator {

using namespace cluster_internal;  // NOLINT(build/namespaces): the library's own helpers

constexpr uint32_t kDefaultPageSize = 100;

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
  PublishWatched();
}

// ---- Watching

void Cluster::PublishWatched() {
  for (auto it = watches_.begin(); it != watches_.end();) {
    std::shared_ptr<JobWatch> watch = it->second.lock();
    JobManager* job = watch ? FindJob(it->first) : nullptr;
    if (job == nullptr) {
      watches_.erase(it++);
      continue;
    }
    watch->Publish(StatusOf(*job));
    ++it;
  }
}

absl::StatusOr<std::shared_ptr<JobWatch>> Cluster::Watch(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  JobManager* job = FindJob(job_id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  std::weak_ptr<JobWatch>& slot = watches_[job_id];
  std::shared_ptr<JobWatch> watch = slot.lock();
  if (watch == nullptr) {
    watch = std::make_shared<JobWatch>();
    slot = watch;
  }
  watch->Publish(StatusOf(*job));
  if (shutdown_) watch->Close();
  return watch;
}

void Cluster::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  for (auto& [id, weak] : watches_) {
    if (std::shared_ptr<JobWatch> watch = weak.lock()) watch->Close();
  }
}

bool Cluster::shutting_down() {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

}  // namespace ringmaster::coordinator
