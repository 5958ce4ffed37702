// The coordinator's state behind its two gRPC services: registered nodes (inventory, last
// heartbeat, command outbox), one JobManager per job, and the scheduling that ties them: after
// every event, free nodes are offered to jobs gathering nodes, oldest job first, nodes by name,
// one job per node at a time. A job is offered nodes only when enough are free for its minimum
// (MIN of `nodes: MIN:MAX`); until then it holds none and later jobs may take them.
//
// Failure detection: a node whose agent sent nothing for lost_after is lost (Tick); the job that
// holds it sees NodeLost. Its Heartbeat stream may come back later, which makes it ready again.
// An agent registers again on every reconnection (agent restart or a broken stream); its first
// message then says whether the ranks survived: if it reports none of the current generation of
// the job that holds the node, they are gone and that job sees NodeLost.
// Ranks reported for a generation that is no longer current (or of a job that ended) are sent a
// StopRanks, which stops every generation up to its own: one per node and job unless a higher
// stale generation is reported (an ended job's: one covering all), so stale reports cannot queue
// commands without bound. That is how ranks that outlived a restart of their job or of the
// coordinator are cleaned up.
//
// On a coordinator restart (Create with a database that has jobs), non-terminal jobs are
// restored by JobManager::Restore and nodes are known by id but lost until their agent sends a
// heartbeat (or registers) again.
//
// Thread-safe: one mutex serialises every event. WatchJob handlers wait on their job's own
// change signal (Watch, job_watch.h), published after every event while the job is watched.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/cluster/agent_outbox.h"
#include "coordinator/cluster/job_manager.h"
#include "coordinator/cluster/job_watch.h"
#include "coordinator/state/clock.h"
#include "coordinator/state/job_db.h"
#include "ringmaster/v1/agent.pb.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster::coordinator {

struct ClusterOptions {
  absl::Duration lost_after = absl::Seconds(10);
  // A node lost this long (silent since its last heartbeat) and held by no job is forgotten:
  // removed from the registry, the database and /metrics (--forget-lost-after). Zero: never.
  absl::Duration forget_lost_after = absl::Hours(24);
  absl::Duration heartbeat_interval = absl::Seconds(2);  // told to agents at Register
  RendezvousOptions windows;                             // last_call, join_timeout
  JobManagerOptions job;                                 // incl. stall_after (--stall-after)
};

// The cluster at one instant, for /metrics (coordinator/metrics/coordinator_metrics.h): taken under
// the cluster's lock in one go, so every figure of a scrape belongs to the same moment.
struct ClusterSnapshot {
  struct Job {
    v1::JobStatus status;  // as GetJob shows it
    std::optional<absl::Duration> last_rendezvous;
  };
  struct Node {
    std::string name;  // the agent's node name (its id when it has none)
    v1::NodeState state = v1::NODE_STATE_UNSPECIFIED;
    absl::Duration heartbeat_age;   // since the agent last talked to this coordinator
    double samples_per_second = 0;  // its measured trainer throughput; 0: not measured
  };
  absl::Time taken_at;
  absl::Time started_at;                   // when this coordinator started
  std::map<JobPhase, int> jobs_per_phase;  // every job, every phase (zeros included)
  std::vector<Job> jobs;                   // not ended, or ended within `keep_ended`; oldest first
  std::vector<Node> nodes;                 // by name
  std::vector<absl::Duration> rendezvous;  // every rendezvous completed since the start
};

class Cluster {
 public:
  // Loads nodes and jobs from `db`. `db` and `clock` must outlive the cluster.
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const ClusterOptions& options, JobDb& db,
                                                         const Clock& clock);

  // ---- Coordinator service
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& request);
  absl::StatusOr<v1::JobStatus> CancelJob(const v1::CancelJobRequest& request);
  v1::ListNodesResponse ListNodes();  // every node, in one response (tests, the server's own)
  // One page of nodes by (name, id): at most request.page_size (0: 500; at most 1000) and about
  // 2 MiB, after request.page_token. InvalidArgument for a token this coordinator did not give.
  absl::StatusOr<v1::ListNodesResponse> ListNodes(const v1::ListNodesRequest& request);
  // Jobs in per-job detail: every job that has not ended plus those that ended (last update)
  // within `keep_ended`, so that the metrics' label sets stay bounded.
  ClusterSnapshot Snapshot(absl::Duration keep_ended);
  // The end of one rank's log: asks the agent that ran it (SendLogs) and waits up to `timeout`
  // for its answer, taken only from that node's stream. NotFound for an unknown job or a log the
  // agent does not have; InvalidArgument for a rank outside the job's newest generation (0 to
  // world size - 1); Unavailable when that node is not connected; DeadlineExceeded when it does
  // not answer in time.
  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& request,
                                              absl::Duration timeout);

  // ---- Agent service
  // Node names: 1-128 letters, digits, '-', '_' or '.', starting with a letter or digit (else
  // InvalidArgument naming the rule). Each call gives the node a new secret (node_secret.h).
  // A known node name may only be registered again with the node's current secret
  // (previous_node_secret), whether its agent is connected, away or not yet back after a restart
  // of this coordinator: PermissionDenied without. ForgetNode (an operator) frees a name whose
  // secret is lost.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  // Removes the node named `node_name` (registry and database), so that any agent may register
  // the name again: `ringmaster nodes forget`. NotFound for an unknown name; FailedPrecondition
  // while its agent has a stream open or a job holds it.
  absl::Status ForgetNode(const std::string& node_name);
  // A Heartbeat stream of `node_id` opened with `secret`: it takes over the node's outbox (an
  // older stream of the node stops receiving). NotFound for an unknown node: the agent registers
  // again. PermissionDenied when `secret` is not the node's current one. AlreadyExists when a
  // stream opened with the current secret is still attached: one stream per registration, so
  // that a copy of the secret cannot take the node from the agent that registered it.
  absl::StatusOr<std::pair<std::shared_ptr<AgentOutbox>, uint64_t>> AttachStream(
      const std::string& node_id, std::string_view secret);
  void DetachStream(const std::string& node_id, uint64_t epoch);
  // One message from a node's Heartbeat stream. NotFound for an unknown node.
  absl::Status OnAgentMessage(const v1::AgentMessage& message);

  // ---- Time
  // Lost and forgotten nodes, rendezvous deadlines; the server calls it a few times a second.
  void Tick();

  // ---- Watching
  // The change signal of job `job_id` (NotFound for an unknown job), holding its status now.
  // Every watcher of a job shares one; after each event the cluster publishes the status of
  // every job someone still holds a signal of, which wakes its watchers only when it changed.
  absl::StatusOr<std::shared_ptr<JobWatch>> Watch(const std::string& job_id);
  // Closes every job's signal for good (server shutdown).
  void Shutdown();
  bool shutting_down();

 private:
  struct Node {
    std::string node_id;
    v1::NodeInventory inventory;
    v1::ApiVersion agent_version;
    absl::Time registered_at;
    absl::Time last_heartbeat_at;
    bool lost = true;  // until its agent talks to this coordinator
    std::shared_ptr<AgentOutbox> outbox;
    // Per job: the generation up to which its ranks here were sent a StopRanks (see
    // StopStaleRanks).
    absl::flat_hash_map<std::string, int64_t> stopped_up_to;
    // Registered again while running a job's ranks: its next message must still report them.
    bool verify_ranks = false;
    bool warned_stray_logs = false;    // logged a LogTail it was not asked for (this registration)
    std::string secret_sha256;         // digest of the current registration's secret
    uint64_t registration = 0;         // counts Register calls of this node in this process
    uint64_t stream_registration = 0;  // `registration` when the attached stream opened
    // Registrations again while running a job's ranks, within kStreamBreakWindow (each follows
    // a broken stream): see CountStreamBreak.
    std::deque<absl::Time> stream_breaks;
  };

  Cluster(const ClusterOptions& options, JobDb& db, const Clock& clock);
  absl::Status Load();

  Node* FindNode(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobManager* FindJob(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobManager* JobHolding(const std::string& node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Node& AddNode(std::string node_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ready, Busy (`busy`: held by a job) or Lost.
  static v1::NodeState StateOf(const Node& node, bool busy);
  void FillNodeInfo(const Node& node, v1::NodeInfo* info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<const Node*> NodesByName() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes nodes lost for options_.forget_lost_after (Tick).
  void ForgetLostNodes(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NodeLost(Node& node, std::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issue #31: an agent whose every stream breaks before its reports are read registers again
  // and again while its job waits at step 0 forever. The kMaxStreamBreaks-th registration within
  // kStreamBreakWindow while the node runs `job`'s ranks fails that generation, naming the node.
  void CountStreamBreak(Node& node, JobManager& job, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopStaleRanks(Node& node, const v1::RankProgress& report, const JobManager& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Offers free, live nodes to jobs in rendezvous, then publishes the watched jobs' status
  // (PublishWatched).
  void Schedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes each watched job's status to its JobWatch; drops signals no one holds any more.
  void PublishWatched() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Schedule's first part: free, live, connected nodes to jobs in rendezvous, oldest job first.
  void OfferFreeNodes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NewNodeId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // job->Status() plus, while it waits for its minimum, the free nodes it could get (free_nodes_).
  v1::JobStatus StatusOf(JobManager& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterOptions options_;
  JobDb& db_;
  const Clock& clock_;
  const std::shared_ptr<std::atomic<uint64_t>> command_ids_;
  const absl::Time started_at_;

  absl::Mutex mu_;
  std::map<std::string, Node> nodes_ ABSL_GUARDED_BY(mu_);                           // by node id
  absl::flat_hash_map<std::string, std::string> node_by_name_ ABSL_GUARDED_BY(mu_);  // name → id
  std::vector<std::unique_ptr<JobManager>> jobs_ ABSL_GUARDED_BY(mu_);               // oldest first
  absl::flat_hash_map<std::string, size_t> job_index_ ABSL_GUARDED_BY(mu_);
  uint64_t next_node_number_ ABSL_GUARDED_BY(mu_) = 1;
  // Change signals of watched jobs, by job id; an expired one is dropped at the next event.
  absl::flat_hash_map<std::string, std::weak_ptr<JobWatch>> watches_ ABSL_GUARDED_BY(mu_);
  // Free, live, connected nodes no job took at the last OfferFreeNodes (jobs short of MIN).
  size_t free_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // GetLogs waiting for their agent's LogTail, by (node asked, SendLogs command id): an answer
  // counts only from the stream of the node it was asked of.
  absl::flat_hash_map<std::pair<std::string, uint64_t>, std::optional<v1::LogTail>> pending_logs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::coordinator
