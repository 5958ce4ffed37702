// JobDb: rows round-trip, a reopened file restores everything, WAL is on, and files that are
// not ours (garbage, corrupt pages, foreign or newer schemas) are refused naming the path.
#include "coordinator/state/job_db.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fresh database path per test, removed with its -wal/-shm companions.
class JobDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("job_db_test." + std::to_string(getpid()) + "." + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "coordinator.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<JobDb> MustOpen() {
    absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(db).value() : nullptr;
  }

  // Runs `sql` on the file through a separate connection, as another tool would.
  void RawExec(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_free(err);
    sqlite3_close(db);
  }

  fs::path dir_;
  std::string path_;
  FakeClock clock_;
};

JobRecord NewJob(std::string name, std::string request_id = "") {
  JobRecord j;
  j.name = std::move(name);
  j.spec_yaml = "name: " + j.name + "\ndistributed:\n  nodes: \"2:4\"\n";
  j.base_dir = "/shared/jobs";
  j.request_id = std::move(request_id);
  j.max_restarts = 3;
  return j;
}

NodeRecord NewNode(std::string id, std::string name, int gpus) {
  NodeRecord n;
  n.node_id = std::move(id);
  n.inventory.node_name = std::move(name);
  n.inventory.hostname = n.inventory.node_name + ".example";
  n.inventory.addresses = {"10.1.0.7", "fd00::7"};
  n.inventory.rack = "rack-3";
  n.inventory.cpu_cores = 64;
  for (int i = 0; i < gpus; ++i) {
    n.inventory.gpus.push_back(
        GpuInfo{i, "Tesla P40", uint64_t{24} << 30, 6, 1, /*tensor_cores=*/false});
  }
  n.inventory.trainer_samples_per_second = 123.5;
  n.inventory.host_memory_total_bytes = uint64_t{256} << 30;
  n.inventory.host_memory_available_bytes = uint64_t{200} << 30;
  return n;
}

void ExpectSameJob(const JobRecord& a, const JobRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.spec_yaml, b.spec_yaml);
  EXPECT_EQ(a.base_dir, b.base_dir);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.max_restarts, b.max_restarts);
  EXPECT_EQ(a.state.phase, b.state.phase);
  EXPECT_EQ(a.state.generation, b.state.generation);
  EXPECT_EQ(a.state.restarts, b.state.restarts);
  EXPECT_EQ(a.state.error, b.state.error);
  EXPECT_EQ(a.state.last_failure, b.state.last_failure);
  EXPECT_EQ(a.committed_step, b.committed_step);
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.updated_at, b.updated_at);
}

TEST_F(JobDbTest, CreateGetUpdateList) {
  std::unique_ptr<JobDb> db = MustOpen();
  ASSERT_NE(db, nullptr);
  absl::StatusOr<JobRecord> a = db->CreateJob(NewJob("a"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->id, "job-000001");
  EXPECT_EQ(a->created_at, clock_.Now());
  EXPECT_EQ(a->state.phase, JobPhase::kPending);
  clock_.Advance(absl::Seconds(1));
  absl::StatusOr<JobRecord> b = db->CreateJob(NewJob("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id, "job-000002");

  clock_.Advance(absl::Seconds(10));
  JobRecord changed = *a;
  changed.state.phase = JobPhase::kRunning;
  changed.state.generation = 2;
  changed.state.restarts = 2;
  changed.state.error = "restart 2 of 3 (generation 2) after node_lost: node-b";
  changed.state.last_failure = FailureKind::kNodeLost;
  changed.committed_step = 1500;
  changed.name = "renamed";  // not a mutable field: ignored
  absl::StatusOr<JobRecord> updated = db->UpdateJob(changed);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->name, "a");
  EXPECT_EQ(updated->state.phase, JobPhase::kRunning);
  EXPECT_EQ(updated->state.generation, 2);
  EXPECT_EQ(updated->state.last_failure, FailureKind::kNodeLost);
  EXPECT_EQ(updated->committed_step, 1500);
  EXPECT_EQ(updated->created_at, a->created_at);
  EXPECT_EQ(updated->updated_at, clock_.Now());

  absl::StatusOr<JobRecord> got = db->GetJob("job-000001");
  ASSERT_TRUE(got.ok());
  ExpectSameJob(*got, *updated);

  absl::StatusOr<std::vector<JobRecord>> all = db->ListJobs();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "job-000001");
  EXPECT_EQ((*all)[1].id, "job-000002");

  EXPECT_EQ(db->GetJob("job-000099").status().code(), absl::StatusCode::kNotFound);
  JobRecord ghost = *a;
  ghost.id = "job-000099";
  EXPECT_EQ(db->UpdateJob(ghost).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobDbTest, ReopeningTheFileRestoresEverything) {
  JobRecord running;
  std::vector<NodeRecord> nodes_before;
  {
    std::unique_ptr<JobDb> db = MustOpen();
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->CreateJob(NewJob("first", "req-1")).ok());
    absl::StatusOr<JobRecord> j = db->CreateJob(NewJob("second"));
    ASSERT_TRUE(j.ok());
    j->state.phase = JobPhase::kFailed;
    j->state.generation = 3;
    j->state.restarts = 3;
    j->state.error = "restart limit reached";
    j->state.last_failure = FailureKind::kRankExited;
    j->committed_step = 42;
    clock_.Advance(absl::Minutes(5));
    absl::StatusOr<JobRecord> u = db->UpdateJob(*j);
    ASSERT_TRUE(u.ok());
    running = *u;
    ASSERT_TRUE(db->UpsertNode(NewNode("n-2", "beta", 2)).ok());
    ASSERT_TRUE(db->UpsertNode(NewNode("n-1", "alpha", 0)).ok());
    absl::StatusOr<std::vector<NodeRecord>> n = db->ListNodes();
    ASSERT_TRUE(n.ok());
    nodes_before = *n;
  }
  FakeClock later(clock_.Now() + absl::Hours(1));
  absl::StatusOr<std::unique_ptr<JobDb>> reopened = JobDb::Open(path_, later);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  JobDb& db = **reopened;
  absl::StatusOr<JobRecord> got = db.GetJob(running.id);
  ASSERT_TRUE(got.ok());
  ExpectSameJob(*got, running);
  absl::StatusOr<JobRecord> by_request = db.FindJobByRequestId("req-1");
  ASSERT_TRUE(by_request.ok());
  EXPECT_EQ(by_request->id, "job-000001");
  EXPECT_EQ(by_request->name, "first");

  absl::StatusOr<std::vector<NodeRecord>> nodes = db.ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].inventory.node_name, "alpha");  // by name
  const NodeRecord& beta = (*nodes)[1];
  EXPECT_EQ(beta.node_id, "n-2");
  EXPECT_EQ(beta.inventory.hostname, "beta.example");
  EXPECT_THAT(beta.inventory.addresses, ElementsAre("10.1.0.7", "fd00::7"));
  EXPECT_EQ(beta.inventory.rack, "rack-3");
  EXPECT_EQ(beta.inventory.cpu_cores, 64);
  ASSERT_EQ(beta.inventory.gpus.size(), 2u);
  EXPECT_EQ(beta.inventory.gpus[1].index, 1);
  EXPECT_EQ(beta.inventory.gpus[1].name, "Tesla P40");
  EXPECT_EQ(beta.inventory.gpus[1].memory_bytes, uint64_t{24} << 30);
  EXPECT_EQ(beta.inventory.gpus[1].ComputeCapability(), 61);
  EXPECT_FALSE(beta.inventory.gpus[1].tensor_cores);
  EXPECT_EQ(beta.inventory.trainer_samples_per_second, 123.5);
  EXPECT_EQ(beta.inventory.host_memory_total_bytes, uint64_t{256} << 30);
  EXPECT_EQ(beta.inventory.host_memory_available_bytes, uint64_t{200} << 30);
  EXPECT_EQ(beta.registered_at, nodes_before[1].registered_at);

  // Ids continue after the restart; they are never reused.
  absl::StatusOr<JobRecord> third = db.CreateJob(NewJob("third"));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->id, "job-000003");
}

TEST_F(JobDbTest, UsesWalWithFullSync) {
  std::unique_ptr<JobDb> db = MustOpen();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateJob(NewJob("a")).ok());
  EXPECT_TRUE(fs::exists(path_ + "-wal"));
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), JobDb::kSchemaVersion);
  sqlite3_finalize(st);
  sqlite3_close(raw);
}

TEST_F(JobDbTest, RequestIdMakesSubmissionIdempotent) {
  std::unique_ptr<JobDb> db = MustOpen();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->CreateJob(NewJob("a", "req-7")).ok());
  absl::StatusOr<JobRecord> again = db->CreateJob(NewJob("a", "req-7"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("job-000001"));
  // Jobs without a request id never collide.
  ASSERT_TRUE(db->CreateJob(NewJob("b")).ok());
  ASSERT_TRUE(db->CreateJob(NewJob("c")).ok());
  absl::StatusOr<std::vector<JobRecord>> all = db->ListJobs();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  EXPECT_EQ(db->FindJobByRequestId("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobDbTest, NodesUpsertTouchDelete) {
  std::unique_ptr<JobDb> db = MustOpen();
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->UpsertNode(NewNode("n-1", "alpha", 1)).ok());
  const absl::Time first = clock_.Now();
  clock_.Advance(absl::Seconds(30));
  NodeRecord re = NewNode("n-1", "alpha", 4);  // re-registers with more GPUs
  ASSERT_TRUE(db->UpsertNode(re).ok());
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(db->TouchNode("n-1").ok());
  absl::StatusOr<std::vector<NodeRecord>> nodes = db->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].inventory.gpus.size(), 4u);
  EXPECT_EQ((*nodes)[0].registered_at, first);
  EXPECT_EQ((*nodes)[0].last_seen_at, clock_.Now());
  EXPECT_EQ(db->TouchNode("n-9").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(db->DeleteNode("n-1").ok());
  EXPECT_EQ(db->DeleteNode("n-1").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(db->ListNodes()->empty());
  // Many at once, in one transaction; unknown ids are skipped.
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(db->UpsertNode(NewNode(absl::StrCat("m-", i), "x", 0)).ok());
  ASSERT_TRUE(db->DeleteNodes({"m-0", "m-2", "m-4", "n-9"}).ok());
  nodes = db->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].node_id, "m-1");
  EXPECT_EQ((*nodes)[1].node_id, "m-3");
}

TEST_F(JobDbTest, InMemoryDatabaseForTests) {
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock_);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->CreateJob(NewJob("a")).ok());
  EXPECT_EQ((*db)->ListJobs()->size(), 1u);
}

// Issue #20: SQLite takes a 0-byte file for a new database; a truncated or mistyped --db must
// not start an empty coordinator silently.
TEST_F(JobDbTest, EmptyFileIsRefusedAndANewDatabaseIsReported) {
  { std::ofstream f(path_); }
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(), AllOf(HasSubstr(path_), HasSubstr("empty file (0 bytes)")));
  EXPECT_EQ(fs::file_size(path_), 0u);  // left as it was
  fs::remove(path_);
  std::unique_ptr<JobDb> created = MustOpen();
  ASSERT_NE(created, nullptr);
  EXPECT_TRUE(created->created());
  created.reset();
  std::unique_ptr<JobDb> reopened = MustOpen();
  ASSERT_NE(reopened, nullptr);
  EXPECT_FALSE(reopened->created());
}

TEST_F(JobDbTest, NodeSecretDigestsPersistAndVersion1IsMigrated) {
  {
    std::unique_ptr<JobDb> db = MustOpen();
    ASSERT_NE(db, nullptr);
    NodeRecord n = NewNode("n-1", "alpha", 0);
    n.secret_sha256 = std::string(64, 'a');
    ASSERT_TRUE(db->UpsertNode(n).ok());
    absl::StatusOr<std::vector<NodeRecord>> nodes = db->ListNodes();
    ASSERT_TRUE(nodes.ok());
    EXPECT_EQ((*nodes)[0].secret_sha256, std::string(64, 'a'));
  }
  // The same file as a version-1 coordinator left it: no secret column.
  RawExec("ALTER TABLE nodes DROP COLUMN secret_sha256; PRAGMA user_version = 1");
  std::unique_ptr<JobDb> db = MustOpen();
  ASSERT_NE(db, nullptr);
  absl::StatusOr<std::vector<NodeRecord>> nodes = db->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].secret_sha256, "");
  NodeRecord n = NewNode("n-1", "alpha", 0);
  n.secret_sha256 = std::string(64, 'b');
  ASSERT_TRUE(db->UpsertNode(n).ok());
  EXPECT_EQ((*db->ListNodes())[0].secret_sha256, std::string(64, 'b'));
}

TEST_F(JobDbTest, GarbageFileIsRefusedNamingThePath) {
  {
    std::ofstream f(path_);
    for (int i = 0; i < 200; ++i) f << "this is a job list, not a database\n";
  }
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(db.status().message(), AllOf(HasSubstr(path_), HasSubstr("not a database")));
}

TEST_F(JobDbTest, CorruptPagesAreRefusedNamingThePath) {
  {
    std::unique_ptr<JobDb> db = MustOpen();
    ASSERT_NE(db, nullptr);
    for (int i = 0; i < 40; ++i) {
      JobRecord j = NewJob("job" + std::to_string(i));
      j.spec_yaml.append(2000, '#');  // many pages
      ASSERT_TRUE(db->CreateJob(j).ok());
    }
  }  // the last close checkpoints the WAL into the main file
  ASSERT_FALSE(fs::exists(path_ + "-wal"));
  ASSERT_GT(fs::file_size(path_), 8u * 4096);
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);  // pages 2..4: b-tree pages, header included
    const std::string junk(3 * 4096, '\xa5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kDataLoss) << db.status();
  EXPECT_THAT(db.status().message(), HasSubstr(path_));
}

TEST_F(JobDbTest, NewerSchemaIsRefused) {
  ASSERT_NE(MustOpen(), nullptr);
  RawExec("PRAGMA user_version = 99");
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(), AllOf(HasSubstr(path_), HasSubstr("99"), HasSubstr("newer")));
}

TEST_F(JobDbTest, ForeignDatabaseIsRefused) {
  RawExec("CREATE TABLE photos (id INTEGER PRIMARY KEY, blob BLOB)");
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(path_, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(db.status().message(),
              AllOf(HasSubstr(path_), HasSubstr("not a Ringmaster coordinator database")));
}

TEST_F(JobDbTest, UnopenablePathsNameThePath) {
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(dir_.string(), clock_);  // a directory
  EXPECT_FALSE(db.ok());
  EXPECT_THAT(db.status().message(), HasSubstr(dir_.string()));
  const std::string missing = (dir_ / "no" / "such" / "dir" / "c.db").string();
  db = JobDb::Open(missing, clock_);
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(db.status().message(), HasSubstr(missing));
}

}  // namespace
}  // namespace ringmaster::coordinator
