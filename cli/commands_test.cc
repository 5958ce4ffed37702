#include "cli/commands.h"

#include <cstdio>
#include <filesystem>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

class FakeClient final : public CoordinatorClient {
 public:
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& r) override {
    submitted.push_back(r);
    v1::SubmitJobResponse resp;
    resp.set_job_id("job-1");
    return resp;
  }
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& id) override {
    if (id != "job-1" || updates.empty()) return absl::NotFoundError("no job " + id);
    return updates.back();
  }
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest&) override {
    return v1::ListJobsResponse();
  }
  absl::StatusOr<v1::JobStatus> CancelJob(const std::string&, const std::string&) override {
    v1::JobStatus s;
    s.set_phase(v1::JOB_PHASE_CANCELLED);
    return s;
  }
  absl::StatusOr<v1::ListNodesResponse> ListNodes() override { return nodes; }
  v1::ListNodesResponse nodes;
  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& req) override {
    last_logs_request = req;
    return logs;
  }
  v1::GetLogsRequest last_logs_request;
  absl::Status ForgetNode(const std::string& name) override {
    forgotten.push_back(name);
    return forget;
  }
  std::vector<std::string> forgotten;
  absl::Status forget = absl::OkStatus();
  absl::StatusOr<v1::GetLogsResponse> logs = absl::NotFoundError("no logs");
  absl::Status WatchJob(const std::string&, const std::function<void(const v1::JobStatus&)>& f,
                        const std::function<bool()>&) override {
    ++watches;
    if (watches <= unavailable_first) return absl::UnavailableError("coordinator restarting");
    for (const v1::JobStatus& s : updates) f(s);
    return absl::OkStatus();
  }

  std::vector<v1::SubmitJobRequest> submitted;
  std::vector<v1::JobStatus> updates;
  int watches = 0;
  int unavailable_first = 0;
};

v1::JobStatus Phase(v1::JobPhase p, int64_t step) {
  v1::JobStatus s;
  s.set_phase(p);
  s.set_step(step);
  s.set_total_steps(10);
  return s;
}

// Captures what a command prints.
struct Captured {
  Captured() : out(std::tmpfile()), err(std::tmpfile()) {
    io.out = out;
    io.err = err;
  }
  ~Captured() {
    std::fclose(out);
    std::fclose(err);
  }
  static std::string Text(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    return s;
  }
  std::FILE* out;
  std::FILE* err;
  CliIo io;
};

TEST(Commands, FollowPrintsPlainLinesAndSucceeds) {
  FakeClient c;
  c.updates = {Phase(v1::JOB_PHASE_PENDING, 0), Phase(v1::JOB_PHASE_RUNNING, 3),
               Phase(v1::JOB_PHASE_RUNNING, 3), Phase(v1::JOB_PHASE_SUCCEEDED, 10)};
  c.unavailable_first = 1;  // the watch is resumed
  Captured cap;
  EXPECT_EQ(FollowJob(c, "job-1", cap.io), 0);
  const std::string out = Captured::Text(cap.out);
  EXPECT_THAT(out, HasSubstr("Pending"));
  EXPECT_THAT(out, HasSubstr("Running  step 3/10"));
  EXPECT_THAT(out, HasSubstr("Succeeded  step 10/10"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);  // the repeated status is not printed
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

// Off a terminal, one line per update: a new rate or ETA for the same step is not a new line.
TEST(Commands, FollowPrintsOneLinePerStepOffATerminal) {
  FakeClient c;
  auto running = [](int64_t step, double rate) {
    v1::JobStatus s = Phase(v1::JOB_PHASE_RUNNING, step);
    s.set_samples_per_second(rate);
    return s;
  };
  c.updates = {running(3, 40), running(3, 80), running(4, 41), running(4, 42),
               Phase(v1::JOB_PHASE_SUCCEEDED, 10)};
  Captured cap;
  EXPECT_EQ(FollowJob(c, "job-1", cap.io), 0);
  const std::string out = Captured::Text(cap.out);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_THAT(out, HasSubstr("step 3/10  loss 0.0000  40.0 samples/s"));
  EXPECT_THAT(out, HasSubstr("step 4/10  loss 0.0000  41.0 samples/s"));
  // On a terminal the line is redrawn with every new figure.
  Captured tty;
  tty.io.tty = true;
  EXPECT_EQ(FollowJob(c, "job-1", tty.io), 0);
  const std::string drawn = Captured::Text(tty.out);
  EXPECT_EQ(std::count(drawn.begin(), drawn.end(), '\r'), 5) << drawn;
}

TEST(Commands, FollowRedrawsOnATerminalAndFailsOnFailure) {
  FakeClient c;
  v1::JobStatus failed = Phase(v1::JOB_PHASE_FAILED, 3);
  failed.set_error("rank 2 exited with 1");
  c.updates = {Phase(v1::JOB_PHASE_RUNNING, 3), failed};
  Captured cap;
  cap.io.tty = true;
  EXPECT_EQ(FollowJob(c, "job-1", cap.io), 1);
  const std::string out = Captured::Text(cap.out);
  EXPECT_THAT(out, HasSubstr("\r\033[KRunning"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_THAT(Captured::Text(cap.err), HasSubstr("rank 2 exited with 1"));
}

TEST(Commands, SubmitSendsTheFileWithItsDirectory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("commands_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic((dir / "job.yaml").string(), "name: x\n").ok());
  FakeClient c;
  Captured cap;
  EXPECT_EQ(CmdSubmit(c, (dir / "job.yaml").string(), false, cap.io), 0);
  ASSERT_EQ(c.submitted.size(), 1u);
  EXPECT_EQ(c.submitted[0].job_yaml(), "name: x\n");
  EXPECT_EQ(c.submitted[0].base_dir(), dir.string());
  EXPECT_EQ(c.submitted[0].source(), "job.yaml");
  EXPECT_FALSE(c.submitted[0].request_id().empty());
  EXPECT_EQ(Captured::Text(cap.out), "job-1\n");
  Captured cap2;
  EXPECT_EQ(CmdStatus(c, "nope", cap2.io), 1);
  EXPECT_THAT(Captured::Text(cap2.err), HasSubstr("no job nope"));
  fs::remove_all(dir);
}

// Issue #31: a job file (or its path) that is not UTF-8 cannot be sent in a protobuf `string`:
// refused here, naming the file and the byte, and nothing is sent.
TEST(Commands, SubmitRefusesAJobFileThatIsNotUtf8) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("commands_test_utf8_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic((dir / "job.yaml").string(), "name: x\xff\n").ok());
  ASSERT_TRUE(WriteFileAtomic((dir / "j\xfe.yaml").string(), "name: x\n").ok());
  FakeClient c;
  Captured cap;
  EXPECT_EQ(CmdSubmit(c, (dir / "job.yaml").string(), false, cap.io), 1);
  EXPECT_THAT(Captured::Text(cap.err),
              HasSubstr("job.yaml: byte 7 (0xff) is not valid UTF-8; a job file must be UTF-8"));
  Captured cap2;
  EXPECT_EQ(CmdSubmit(c, (dir / "j\xfe.yaml").string(), false, cap2.io), 1);
  EXPECT_THAT(Captured::Text(cap2.err), HasSubstr("j\\xfe.yaml' is not valid UTF-8"));
  EXPECT_TRUE(c.submitted.empty());
  fs::remove_all(dir);
}

// A job needing more nodes than are Ready is accepted; submit says it waits, and for what.
TEST(Commands, SubmitSaysAJobWaitsForNodesThatAreNotReady) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("commands_wait_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(WriteFileAtomic((dir / "job.yaml").string(), "name: x\n").ok());
  FakeClient c;
  v1::JobStatus waiting = Phase(v1::JOB_PHASE_RENDEZVOUS, 0);
  waiting.set_job_id("job-1");
  waiting.mutable_rendezvous()->set_min_nodes(3);
  waiting.mutable_rendezvous()->set_max_nodes(3);
  c.updates = {waiting};
  for (v1::NodeState st : {v1::NODE_STATE_READY, v1::NODE_STATE_BUSY, v1::NODE_STATE_LOST}) {
    c.nodes.add_nodes()->set_state(st);
  }
  c.nodes.mutable_nodes(1)->set_job_id("job-1");  // joined this job already
  Captured cap;
  EXPECT_EQ(CmdSubmit(c, (dir / "job.yaml").string(), false, cap.io), 0);
  EXPECT_EQ(Captured::Text(cap.out), "job-1\n");
  EXPECT_THAT(Captured::Text(cap.err),
              HasSubstr("job job-1 needs 3 nodes; the cluster has 2 Ready (of 3 registered): it "
                        "waits for 1 more node (2 of 3 Ready)"));
  // Ctrl-C while following: the job goes on, and the user is told how to stop it.
  Captured stopped;
  stopped.io.interrupted = [] { return true; };
  c.unavailable_first = 100;
  EXPECT_EQ(CmdSubmit(c, (dir / "job.yaml").string(), true, stopped.io), 130);
  EXPECT_THAT(Captured::Text(stopped.err),
              HasSubstr("stopped following; job job-1 keeps running (`ringmaster status job-1`; "
                        "`ringmaster cancel job-1` stops it)"));
  // Enough Ready nodes: nothing to say.
  c.nodes.mutable_nodes(2)->set_state(v1::NODE_STATE_READY);
  Captured enough;
  EXPECT_EQ(CmdSubmit(c, (dir / "job.yaml").string(), false, enough.io), 0);
  EXPECT_EQ(Captured::Text(enough.err), "");
  fs::remove_all(dir);
}

TEST(Commands, LogsPrintsTheRanksLogTailAndSaysWhenItIsCut) {
  FakeClient c;
  v1::GetLogsResponse r;
  r.set_node_id("node-000002");
  r.set_generation(3);
  r.set_data("step 9 loss 0.1\n");
  r.set_truncated(true);
  c.logs = r;
  Captured cap;
  EXPECT_EQ(CmdLogs(c, "job-1", 2, 100, cap.io), 0);
  EXPECT_EQ(c.last_logs_request.job_id(), "job-1");
  EXPECT_EQ(c.last_logs_request.rank(), 2u);
  EXPECT_EQ(c.last_logs_request.max_bytes(), 100u);
  EXPECT_EQ(Captured::Text(cap.out), "step 9 loss 0.1\n");
  EXPECT_THAT(Captured::Text(cap.err), HasSubstr("generation 3, node node-000002"));

  c.logs = absl::UnavailableError("node-000002 is not connected");
  Captured cap2;
  EXPECT_EQ(CmdLogs(c, "job-1", 2, 0, cap2.io), 1);
  EXPECT_THAT(Captured::Text(cap2.err), HasSubstr("not connected"));
}

TEST(Commands, NodesForgetAsksTheCoordinatorAndSaysWhy) {
  FakeClient c;
  Captured cap;
  EXPECT_EQ(CmdNodesForget(c, "gpu-3", cap.io), 0);
  EXPECT_EQ(c.forgotten, std::vector<std::string>{"gpu-3"});
  EXPECT_THAT(Captured::Text(cap.out), HasSubstr("node gpu-3 forgotten"));
  c.forget =
      absl::FailedPreconditionError("forget: node gpu-3 (node-000004) has a connected agent");
  Captured cap2;
  EXPECT_EQ(CmdNodesForget(c, "gpu-3", cap2.io), 1);
  EXPECT_THAT(Captured::Text(cap2.err), HasSubstr("has a connected agent"));
}

// Issue #31: text from the coordinator reaches the terminal escaped: a log a trainer wrote (its
// lines kept, ESC, CR and bytes that are not UTF-8 escaped) and an error quoting a job file.
TEST(Commands, ServerTextIsPrintedEscaped) {
  FakeClient c;
  v1::GetLogsResponse r;
  r.set_node_id("node-000002");
  r.set_data("label '\x1b[2J' unknown\r\nconfig.json: '\xff\xfe{'\n");
  c.logs = r;
  Captured cap;
  EXPECT_EQ(CmdLogs(c, "job-1", 0, 0, cap.io), 0);
  EXPECT_EQ(Captured::Text(cap.out), "label '\\x1b[2J' unknown\\r\nconfig.json: '\\xff\\xfe{'\n");

  c.logs = absl::InvalidArgumentError("job.yaml: unknown key 'bogus\x1b[2J\r'");
  Captured cap2;
  EXPECT_EQ(CmdLogs(c, "job-1", 0, 0, cap2.io), 1);
  EXPECT_EQ(Captured::Text(cap2.err), "ringmaster: job.yaml: unknown key 'bogus\\x1b[2J\\r'\n");
}

}  // namespace
}  // namespace ringmaster::cli
