// The coordinator's durable state: jobs and registered nodes in one SQLite file, so that a
// restarted coordinator finds every job (phase, generation, restarts used, latest committed
// checkpoint step) and node where it left them.
//
// Durability: WAL journal (readers never block the writer; a crash mid-write leaves the last
// committed transaction) with synchronous=FULL: every commit is fsynced before it returns.
// NORMAL would be durable across a coordinator crash but may lose the last commits on power
// loss, and here a lost commit is not harmless: a generation number handed out twice would let
// ranks of a dead generation meet the new one's rendezvous keys, and an acknowledged
// submission would vanish. Writes are rare (submissions and phase changes, never heartbeats),
// so the fsync per commit costs nothing that matters.
//
// The schema is versioned with PRAGMA user_version (kSchemaVersion) and the file is marked as
// ours with PRAGMA application_id; a newer schema, a foreign SQLite file or a corrupt one is
// refused with an error naming the path, never silently rewritten.
//
// Thread-safe: one connection, serialised by a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/state/clock.h"
#include "coordinator/state/job_state.h"
#include "coordinator/state/node_inventory.h"

struct sqlite3;

namespace ringmaster::coordinator {

struct JobRecord {
  std::string id;          // "job-000001", assigned by CreateJob
  std::string name;        // the spec's `name`
  std::string spec_yaml;   // as submitted
  std::string base_dir;    // where the spec's relative paths resolve
  std::string request_id;  // the submitter's idempotency key; empty: none
  int max_restarts = 0;
  JobStateSnapshot state;
  int64_t committed_step = 0;  // latest complete checkpoint; 0: none
  absl::Time created_at;       // set by the database from its clock
  absl::Time updated_at;
};

struct NodeRecord {
  std::string node_id;
  NodeInventory inventory;
  absl::Time registered_at;
  absl::Time last_seen_at;
  std::string
      secret_sha256;  // digest of the node's current secret; '' when none (see node_secret.h)
};

class JobDb {
 public:
  static constexpr int kSchemaVersion = 2;               // 2: nodes.secret_sha256
  static constexpr int32_t kApplicationId = 0x524d4344;  // "RMCD"

  // Opens `path` (":memory:" for tests), creating the file and schema when absent. Errors name
  // the path: DataLoss for a corrupt file or one that is not SQLite, FailedPrecondition for a
  // foreign database or a newer schema or an empty (0-byte) file, Unavailable when it cannot be
  // opened or locked. created() tells whether this call made a new database.
  // `clock` stamps created/updated times and must outlive the database.
  static absl::StatusOr<std::unique_ptr<JobDb>> Open(const std::string& path, const Clock& clock);
  ~JobDb();
  JobDb(const JobDb&) = delete;
  JobDb& operator=(const JobDb&) = delete;

  // Stores a new job and returns it with id and times set (the id and times in `job` are
  // ignored). AlreadyExists, naming the existing job, when request_id is non-empty and taken.
  absl::StatusOr<JobRecord> CreateJob(const JobRecord& job);
  // Writes the mutable fields (state, committed_step) of job `job.id` and stamps updated_at.
  // NotFound for an unknown id.
  absl::StatusOr<JobRecord> UpdateJob(const JobRecord& job);
  absl::StatusOr<JobRecord> GetJob(const std::string& id);
  // NotFound when no job has that request id.
  absl::StatusOr<JobRecord> FindJobByRequestId(const std::string& request_id);
  // Oldest first.
  absl::StatusOr<std::vector<JobRecord>> ListJobs();

  // Inserts or replaces by node_id; registered_at is kept from the first registration.
  absl::Status UpsertNode(const NodeRecord& node);
  absl::Status TouchNode(const std::string& node_id);  // last_seen_at = now
  absl::Status DeleteNode(const std::string& node_id);
  // Deletes every node of `node_ids` in one transaction (unknown ids are skipped): forgetting
  // 2000 lost nodes one fsync at a time held the coordinator for ~16 s.
  absl::Status DeleteNodes(const std::vector<std::string>& node_ids);
  absl::StatusOr<std::vector<NodeRecord>> ListNodes();  // by node name

  const std::string& path() const { return path_; }
  // This Open created the database (no file, or an in-memory one): the caller says so in its log.
  bool created() const { return created_; }

 private:
  JobDb(std::string path, sqlite3* db, const Clock& clock);
  absl::Status Init();
  // An error status for SQLite result `rc`, naming the path and `what`. Call with mu_ held (it
  // reads the connection's last error message).
  absl::Status Error(int rc, std::string_view what) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const Clock& clock_;
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  bool created_ = false;  // set once by Init
};

}  // namespace ringmaster::coordinator
