// JobDb over SQLite: schema, open-time checks, job and node rows.
#include "coordinator/state/job_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/absl_view.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace ringmaster::coordinator {
namespace {

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the number in the id; never reused
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  spec_yaml TEXT NOT NULL,
  base_dir TEXT NOT NULL,
  request_id TEXT,                        -- NULL when none (NULLs never collide in UNIQUE)
  max_restarts INTEGER NOT NULL,
  phase TEXT NOT NULL,                    -- JobPhaseName
  generation INTEGER NOT NULL,
  restarts INTEGER NOT NULL,
  error TEXT NOT NULL,
  last_failure TEXT NOT NULL,             -- FailureKindName
  committed_step INTEGER NOT NULL,
  created_us INTEGER NOT NULL,            -- Unix microseconds
  updated_us INTEGER NOT NULL
);
CREATE UNIQUE INDEX jobs_by_request_id ON jobs(request_id);
CREATE TABLE nodes (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  inventory_json TEXT NOT NULL,           -- NodeInventory, see InventoryToJson
  registered_us INTEGER NOT NULL,
  last_seen_us INTEGER NOT NULL
);
)sql";

// Version 2 (issue #20): the SHA-256 digest of each node's current registration secret, so that
// a restarted coordinator still knows which agent holds a node ('' for rows written by v1).
constexpr const char* kSchemaV1ToV2 =
    "ALTER TABLE nodes ADD COLUMN secret_sha256 TEXT NOT NULL DEFAULT ''";

constexpr const char* kJobColumns =
    "id, name, spec_yaml, base_dir, request_id, max_restarts, phase, generation, restarts, "
    "error, last_failure, committed_step, created_us, updated_us";

// One prepared statement, finalized on destruction.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  int Step() { return sqlite3_step(stmt_); }

  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p),
                                      static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

nlohmann::json InventoryToJson(const NodeInventory& inv) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuInfo& g : inv.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"memory_bytes", g.memory_bytes},
                    {"cc_major", g.cc_major},
                    {"cc_minor", g.cc_minor},
                    {"tensor_cores", g.tensor_cores}});
  }
  return {{"node_name", inv.node_name},
          {"hostname", inv.hostname},
          {"addresses", inv.addresses},
          {"rack", inv.rack},
          {"cpu_cores", inv.cpu_cores},
          {"gpus", gpus},
          {"trainer_samples_per_second", inv.trainer_samples_per_second},
          {"host_memory_total_bytes", inv.host_memory_total_bytes},
          {"host_memory_available_bytes", inv.host_memory_available_bytes}};
}

// Throws nlohmann::json::exception on a malformed document.
NodeInventory InventoryFromJson(const nlohmann::json& j) {
  NodeInventory inv;
  inv.node_name = j.at("node_name").get<std::string>();
  inv.hostname = j.at("hostname").get<std::string>();
  inv.addresses = j.at("addresses").get<std::vector<std::string>>();
  inv.rack = j.at("rack").get<std::string>();
  inv.cpu_cores = j.at("cpu_cores").get<int>();
  for (const nlohmann::json& g : j.at("gpus")) {
    GpuInfo gpu;
    gpu.index = g.at("index").get<int>();
    gpu.name = g.at("name").get<std::string>();
    gpu.memory_bytes = g.at("memory_bytes").get<uint64_t>();
    gpu.cc_major = g.at("cc_major").get<int>();
    gpu.cc_minor = g.at("cc_minor").get<int>();
    gpu.tensor_cores = g.at("tensor_cores").get<bool>();
    inv.gpus.push_back(std::move(gpu));
  }
  inv.trainer_samples_per_second = j.at("trainer_samples_per_second").get<double>();
  // Absent in rows written before agents reported host memory: not reported.
  inv.host_memory_total_bytes = j.value("host_memory_total_bytes", uint64_t{0});
  inv.host_memory_available_bytes = j.value("host_memory_available_bytes", uint64_t{0});
  return inv;
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }
absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

}  // namespace

JobDb::JobDb(std::string path, sqlite3* db, const Clock& clock)
    : path_(std::move(path)), clock_(clock), db_(db) {}

JobDb::~JobDb() {
  absl::MutexLock lock(&mu_);
  sqlite3_close_v2(db_);
}

absl::Status JobDb::Error(int rc, std::string_view what) const {
  const std::string msg = absl::StrCat(path_, ": ", ToAbsl(what), ": ",
                                       db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::DataLossError(absl::StrCat(msg, " (not a SQLite database, or corrupt)"));
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_AUTH:
      return absl::UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status JobDb::Exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  sqlite3_free(err);  // sqlite3_errmsg still holds the text
  if (rc != SQLITE_OK) return Error(rc, sql);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JobDb>> JobDb::Open(const std::string& path, const Clock& clock) {
  // SQLite takes an empty file for a new database and would start an empty coordinator on it
  // without a word: a 0-byte file is far more likely a truncated or mistyped one.
  struct stat st {};
  const bool exists = path != ":memory:" && ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the coordinator database is not a regular file"));
  }
  if (exists && st.st_size == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": empty file (0 bytes), not a coordinator database; remove it to start a new one"));
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = absl::StrCat(path, ": cannot open the coordinator database: ",
                                   db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close_v2(db);
    return absl::UnavailableError(msg);
  }
  std::unique_ptr<JobDb> jdb(new JobDb(path, db, clock));
  RM_RETURN_IF_ERROR(jdb->Init());
  return jdb;
}

absl::Status JobDb::Init() {
  absl::MutexLock lock(&mu_);
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, 5000);  // another process (an operator's sqlite3 shell) may hold it

  // Reading the header is where a file that is not SQLite (or is damaged) first shows.
  auto pragma_int = [&](const char* sql, int64_t* out) -> absl::Status {
    Statement st;
    int rc = sqlite3_prepare_v2(db_, sql, -1, st.out(), nullptr);
    if (rc == SQLITE_OK) rc = st.Step();
    if (rc != SQLITE_ROW) return Error(rc, "reading the database header");
    *out = st.Int(0);
    return absl::OkStatus();
  };
  int64_t app_id = 0, version = 0, objects = 0;
  RM_RETURN_IF_ERROR(pragma_int("PRAGMA application_id", &app_id));
  RM_RETURN_IF_ERROR(pragma_int("PRAGMA user_version", &version));
  RM_RETURN_IF_ERROR(pragma_int("SELECT count(*) FROM sqlite_master", &objects));
  const bool fresh = app_id == 0 && version == 0 && objects == 0;
  if (!fresh) {
    if (app_id != kApplicationId) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: not a Ringmaster coordinator database (application_id 0x%08x, expected 0x%08x)",
          path_, static_cast<uint32_t>(app_id), static_cast<uint32_t>(kApplicationId)));
    }
    if (version > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(path_, ": schema version ", version,
                                                        " was written by a newer coordinator; "
                                                        "this one knows up to ",
                                                        kSchemaVersion));
    }
    if (version < 1) {
      return absl::DataLossError(
          absl::StrCat(path_, ": coordinator database without a schema version"));
    }
  }

  // WAL needs shared memory beside the file; network filesystems may refuse it.
  {
    Statement st;
    int rc = sqlite3_prepare_v2(db_, "PRAGMA journal_mode=WAL", -1, st.out(), nullptr);
    if (rc == SQLITE_OK) rc = st.Step();
    if (rc != SQLITE_ROW) return Error(rc, "setting journal_mode=WAL");
    const std::string mode = st.Text(0);
    if (mode != "wal" && !(path_ == ":memory:" && mode == "memory")) {
      return absl::UnavailableError(
          absl::StrCat(path_, ": cannot use the WAL journal (journal_mode is ", mode,
                       "); put the database on a local filesystem"));
    }
  }
  RM_RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));

  if (fresh) {
    RM_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    absl::Status st = Exec(kSchemaV1);
    if (st.ok()) st = Exec(kSchemaV1ToV2);
    if (st.ok()) {
      st = Exec(absl::StrCat("PRAGMA application_id=", kApplicationId,
                             "; PRAGMA user_version=", kSchemaVersion)
                    .c_str());
    }
    if (st.ok()) st = Exec("COMMIT");
    if (!st.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return st;
    }
    created_ = true;
    return absl::OkStatus();
  }

  // Pages damaged inside a valid header only show when read: check them all once, at open (the
  // database is small: a row per job and per node).
  {
    Statement check;  // finalized before any migration writes
    int rc = sqlite3_prepare_v2(db_, "PRAGMA quick_check(4)", -1, check.out(), nullptr);
    if (rc == SQLITE_OK) rc = check.Step();
    if (rc != SQLITE_ROW) return Error(rc, "checking integrity");
    std::string problems = check.Text(0);
    if (problems != "ok") {
      while ((rc = check.Step()) == SQLITE_ROW) absl::StrAppend(&problems, "; ", check.Text(0));
      return absl::DataLossError(absl::StrCat(
          path_, ": coordinator database is corrupt (PRAGMA quick_check: ", problems, ")"));
    }
  }
  if (version < kSchemaVersion) {
    // Migrations of a sound database, in one transaction: version 1 → 2.
    RM_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    absl::Status st = Exec(kSchemaV1ToV2);
    if (st.ok()) st = Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str());
    if (st.ok()) st = Exec("COMMIT");
    if (!st.ok()) {
      Exec("ROLLBACK").IgnoreError();
      return st;
    }
  }
  return absl::OkStatus();
}

namespace {

// Reads the row at `st` (columns kJobColumns); DataLoss naming `path` on bad enum text.
absl::StatusOr<JobRecord> JobFromRow(const Statement& st, const std::string& path) {
  JobRecord j;
  j.id = st.Text(0);
  j.name = st.Text(1);
  j.spec_yaml = st.Text(2);
  j.base_dir = st.Text(3);
  j.request_id = st.Text(4);
  j.max_restarts = static_cast<int>(st.Int(5));
  absl::StatusOr<JobPhase> phase = ParseJobPhase(st.Text(6));
  absl::StatusOr<FailureKind> kind = ParseFailureKind(st.Text(10));
  if (!phase.ok() || !kind.ok()) {
    return absl::DataLossError(absl::StrCat(
        path, ": job ", j.id, ": ", (phase.ok() ? kind.status() : phase.status()).message()));
  }
  j.state.phase = *phase;
  j.state.generation = st.Int(7);
  j.state.restarts = static_cast<int>(st.Int(8));
  j.state.error = st.Text(9);
  j.state.last_failure = *kind;
  j.committed_step = st.Int(11);
  j.created_at = FromMicros(st.Int(12));
  j.updated_at = FromMicros(st.Int(13));
  return j;
}

}  // namespace

absl::StatusOr<JobRecord> JobDb::CreateJob(const JobRecord& job) {
  absl::MutexLock lock(&mu_);
  RM_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> absl::StatusOr<JobRecord> {
    if (!job.request_id.empty()) {
      Statement q;
      int rc =
          sqlite3_prepare_v2(db_, "SELECT id FROM jobs WHERE request_id = ?", -1, q.out(), nullptr);
      if (rc != SQLITE_OK) return Error(rc, "looking up a request id");
      q.Bind(1, job.request_id);
      rc = q.Step();
      if (rc == SQLITE_ROW) {
        return absl::AlreadyExistsError(
            absl::StrCat("request id '", job.request_id, "' already created job ", q.Text(0)));
      }
      if (rc != SQLITE_DONE) return Error(rc, "looking up a request id");
    }
    int64_t seq = 0;
    {
      Statement q;
      int rc = sqlite3_prepare_v2(db_, "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'", -1,
                                  q.out(), nullptr);
      if (rc != SQLITE_OK) return Error(rc, "reading the job sequence");
      rc = q.Step();
      if (rc == SQLITE_ROW) {
        seq = q.Int(0);
      } else if (rc != SQLITE_DONE) {
        return Error(rc, "reading the job sequence");
      }
    }
    JobRecord out = job;
    ++seq;
    out.id = absl::StrFormat("job-%06d", seq);
    out.created_at = out.updated_at = clock_.Now();
    Statement ins;
    int rc =
        sqlite3_prepare_v2(db_,
                           absl::StrCat("INSERT INTO jobs (seq, ", kJobColumns,
                                        ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                               .c_str(),
                           -1, ins.out(), nullptr);
    if (rc != SQLITE_OK) return Error(rc, "preparing a job insert");
    ins.Bind(1, seq);
    ins.Bind(2, out.id);
    ins.Bind(3, out.name);
    ins.Bind(4, out.spec_yaml);
    ins.Bind(5, out.base_dir);
    if (out.request_id.empty()) {
      ins.BindNull(6);
    } else {
      ins.Bind(6, out.request_id);
    }
    ins.Bind(7, int64_t{out.max_restarts});
    ins.Bind(8, std::string(JobPhaseName(out.state.phase)));
    ins.Bind(9, out.state.generation);
    ins.Bind(10, int64_t{out.state.restarts});
    ins.Bind(11, out.state.error);
    ins.Bind(12, std::string(FailureKindName(out.state.last_failure)));
    ins.Bind(13, out.committed_step);
    ins.Bind(14, Micros(out.created_at));
    ins.Bind(15, Micros(out.updated_at));
    rc = ins.Step();
    if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("inserting job ", out.id));
    return out;
  };
  absl::StatusOr<JobRecord> out = body();
  if (!out.ok()) {
    Exec("ROLLBACK").IgnoreError();
    return out.status();
  }
  RM_RETURN_IF_ERROR(Exec("COMMIT"));
  return out;
}

absl::StatusOr<JobRecord> JobDb::UpdateJob(const JobRecord& job) {
  absl::MutexLock lock(&mu_);
  Statement st;
  int rc = sqlite3_prepare_v2(db_,
                              "UPDATE jobs SET phase = ?, generation = ?, restarts = ?, error = ?, "
                              "last_failure = ?, committed_step = ?, updated_us = ? WHERE id = ?",
                              -1, st.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a job update");
  const absl::Time now = clock_.Now();
  st.Bind(1, std::string(JobPhaseName(job.state.phase)));
  st.Bind(2, job.state.generation);
  st.Bind(3, int64_t{job.state.restarts});
  st.Bind(4, job.state.error);
  st.Bind(5, std::string(FailureKindName(job.state.last_failure)));
  st.Bind(6, job.committed_step);
  st.Bind(7, Micros(now));
  st.Bind(8, job.id);
  rc = st.Step();
  if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("updating job ", job.id));
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("no job ", job.id, " in ", path_));
  }
  Statement q;
  rc = sqlite3_prepare_v2(db_,
                          absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?").c_str(),
                          -1, q.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a job read");
  q.Bind(1, job.id);
  rc = q.Step();
  if (rc != SQLITE_ROW) return Error(rc, absl::StrCat("reading job ", job.id));
  return JobFromRow(q, path_);
}

absl::StatusOr<JobRecord> JobDb::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Statement q;
  int rc = sqlite3_prepare_v2(
      db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?").c_str(), -1, q.out(),
      nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a job read");
  q.Bind(1, id);
  rc = q.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (rc != SQLITE_ROW) return Error(rc, absl::StrCat("reading job ", id));
  return JobFromRow(q, path_);
}

absl::StatusOr<JobRecord> JobDb::FindJobByRequestId(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  Statement q;
  int rc = sqlite3_prepare_v2(
      db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE request_id = ?").c_str(), -1,
      q.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a job read");
  q.Bind(1, request_id);
  rc = q.Step();
  if (rc == SQLITE_DONE) {
    return absl::NotFoundError(absl::StrCat("no job with request id '", request_id, "'"));
  }
  if (rc != SQLITE_ROW) return Error(rc, "reading a job by request id");
  return JobFromRow(q, path_);
}

absl::StatusOr<std::vector<JobRecord>> JobDb::ListJobs() {
  absl::MutexLock lock(&mu_);
  Statement q;
  int rc = sqlite3_prepare_v2(
      db_, absl::StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY seq").c_str(), -1, q.out(),
      nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing the job list");
  std::vector<JobRecord> out;
  while ((rc = q.Step()) == SQLITE_ROW) {
    RM_ASSIGN_OR_RETURN(JobRecord j, JobFromRow(q, path_));
    out.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) return Error(rc, "listing jobs");
  return out;
}

absl::Status JobDb::UpsertNode(const NodeRecord& node) {
  absl::MutexLock lock(&mu_);
  Statement st;
  // ON CONFLICT keeps the first registered_us: a re-registering agent keeps its history.
  int rc = sqlite3_prepare_v2(
      db_,
      "INSERT INTO nodes (id, name, inventory_json, registered_us, last_seen_us, secret_sha256) "
      "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET name = excluded.name, "
      "inventory_json = excluded.inventory_json, last_seen_us = excluded.last_seen_us, "
      "secret_sha256 = excluded.secret_sha256",
      -1, st.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a node upsert");
  const int64_t now = Micros(clock_.Now());
  st.Bind(1, node.node_id);
  st.Bind(2, node.inventory.node_name);
  st.Bind(3, InventoryToJson(node.inventory).dump());
  st.Bind(4, now);
  st.Bind(5, now);
  st.Bind(6, node.secret_sha256);
  rc = st.Step();
  if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("storing node ", node.node_id));
  return absl::OkStatus();
}

absl::Status JobDb::TouchNode(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  Statement st;
  int rc = sqlite3_prepare_v2(db_, "UPDATE nodes SET last_seen_us = ? WHERE id = ?", -1, st.out(),
                              nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a node update");
  st.Bind(1, Micros(clock_.Now()));
  st.Bind(2, node_id);
  rc = st.Step();
  if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("updating node ", node_id));
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no node ", node_id));
  return absl::OkStatus();
}

absl::Status JobDb::DeleteNode(const std::string& node_id) {
  absl::MutexLock lock(&mu_);
  Statement st;
  int rc = sqlite3_prepare_v2(db_, "DELETE FROM nodes WHERE id = ?", -1, st.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing a node delete");
  st.Bind(1, node_id);
  rc = st.Step();
  if (rc != SQLITE_DONE) return Error(rc, absl::StrCat("deleting node ", node_id));
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(absl::StrCat("no node ", node_id));
  return absl::OkStatus();
}

absl::Status JobDb::DeleteNodes(const std::vector<std::string>& node_ids) {
  if (node_ids.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  RM_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  absl::Status result = absl::OkStatus();
  for (const std::string& id : node_ids) {
    Statement st;
    int rc = sqlite3_prepare_v2(db_, "DELETE FROM nodes WHERE id = ?", -1, st.out(), nullptr);
    if (rc != SQLITE_OK) {
      result = Error(rc, "preparing a node delete");
      break;
    }
    st.Bind(1, id);
    rc = st.Step();
    if (rc != SQLITE_DONE) {
      result = Error(rc, absl::StrCat("deleting node ", id));
      break;
    }
  }
  if (result.ok()) result = Exec("COMMIT");
  if (!result.ok()) Exec("ROLLBACK").IgnoreError();
  return result;
}

absl::StatusOr<std::vector<NodeRecord>> JobDb::ListNodes() {
  absl::MutexLock lock(&mu_);
  Statement q;
  int rc = sqlite3_prepare_v2(
      db_,
      "SELECT id, inventory_json, registered_us, last_seen_us, secret_sha256 FROM nodes "
      "ORDER BY name, id",
      -1, q.out(), nullptr);
  if (rc != SQLITE_OK) return Error(rc, "preparing the node list");
  std::vector<NodeRecord> out;
  while ((rc = q.Step()) == SQLITE_ROW) {
    NodeRecord n;
    n.node_id = q.Text(0);
    try {
      n.inventory = InventoryFromJson(nlohmann::json::parse(q.Text(1)));
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(
          absl::StrCat(path_, ": node ", n.node_id, ": bad inventory: ", e.what()));
    }
    n.registered_at = FromMicros(q.Int(2));
    n.last_seen_at = FromMicros(q.Int(3));
    n.secret_sha256 = q.Text(4);
    out.push_back(std::move(n));
  }
  if (rc != SQLITE_DONE) return Error(rc, "listing nodes");
  return out;
}

}  // namespace ringmaster::coordinator
