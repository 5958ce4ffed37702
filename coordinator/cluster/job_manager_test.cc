// JobManager: a job's generations driven by joins, rank reports, lost nodes, deadlines and
// cancel, with a FakeClock and fake AgentChannels that record the commands; every phase change
// must be in the database.
#include "coordinator/cluster/job_manager.h"

#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "coordinator/cluster/proto_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr char kJobTemplate[] = R"(name: sst2
model:
  init_from: models/bert-tiny
data:
  train: data/train.tsv
output:
  dir: runs/sst2
train:
  global_batch_size: 32
  micro_batch_size: 16
distributed:
  nodes: "NODES"
restart:
  max_restarts: RESTARTS
)";

// Records every command; numbers them like a real outbox would.
class FakeChannel final : public AgentChannel {
 public:
  uint64_t Send(v1::CoordinatorMessage m) override {
    m.set_command_id(++next_id_);
    sent.push_back(std::move(m));
    return next_id_;
  }
  std::vector<v1::StartRanks> Starts() const {
    std::vector<v1::StartRanks> out;
    for (const auto& m : sent) {
      if (m.has_start_ranks()) out.push_back(m.start_ranks());
    }
    return out;
  }
  std::vector<int64_t> StopGenerations() const {
    std::vector<int64_t> out;
    for (const auto& m : sent) {
      if (m.has_stop_ranks()) out.push_back(m.stop_ranks().generation());
    }
    return out;
  }
  std::vector<v1::CoordinatorMessage> sent;

 private:
  uint64_t next_id_ = 100;
};

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    options_.coordinator_address = "coord:7070";
    options_.master_port = 29555;
    windows_.last_call = absl::Seconds(5);
    windows_.join_timeout = absl::Seconds(300);
  }

  std::unique_ptr<JobManager> Submit(const std::string& nodes, int max_restarts = 3) {
    const std::string yaml = absl::StrReplaceAll(
        kJobTemplate, {{"NODES", nodes}, {"RESTARTS", std::to_string(max_restarts)}});
    absl::StatusOr<JobRequirements> req =
        ParseJobRequirements(yaml, "job.yaml", "/shared/jobs", windows_);
    EXPECT_TRUE(req.ok()) << req.status();
    JobRecord record;
    record.name = req->spec.name;
    record.spec_yaml = yaml;
    record.base_dir = "/shared/jobs";
    record.max_restarts = req->max_restarts;
    absl::StatusOr<JobRecord> stored = db_->CreateJob(record);
    EXPECT_TRUE(stored.ok()) << stored.status();
    absl::StatusOr<std::unique_ptr<JobManager>> m =
        JobManager::Create(*std::move(stored), *std::move(req), options_, *db_, clock_);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }

  static PlanNode Node(const std::string& name) {
    PlanNode n;
    n.node_id = "id-" + name;
    n.inventory.node_name = name;
    n.inventory.hostname = "host-" + name;
    n.inventory.addresses = {"10.0.0." + std::to_string(name[0] - 'a' + 1)};
    n.inventory.cpu_cores = 8;
    return n;
  }

  FakeChannel& Channel(const std::string& name) {
    auto& c = channels_[name];
    if (!c) c = std::make_shared<FakeChannel>();
    return *c;
  }

  void Join(JobManager& job, const std::string& name) {
    Channel(name);
    absl::Status st = job.Join(Node(name), channels_[name]);
    ASSERT_TRUE(st.ok()) << st;
  }

  static v1::RankProgress Report(const JobManager& job, int rank, v1::RankProcessState state,
                                 int exit_code = 0) {
    v1::RankProgress r;
    r.set_job_id(job.id());
    r.set_generation(job.generation());
    r.set_global_rank(static_cast<uint32_t>(rank));
    r.set_state(state);
    r.set_exit_code(exit_code);
    return r;
  }

  void Exit(JobManager& job, const std::string& node, int rank, int code,
            const std::string& error_line = "") {
    v1::RankProgress r = Report(job, rank, v1::RANK_PROCESS_STATE_EXITED, code);
    r.set_last_error_line(error_line);
    absl::Status st = job.OnRankReport("id-" + node, r);
    ASSERT_TRUE(st.ok()) << st;
  }

  JobRecord Stored(const JobManager& job) {
    absl::StatusOr<JobRecord> r = db_->GetJob(job.id());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : JobRecord{};
  }

  FakeClock clock_;
  std::unique_ptr<JobDb> db_;
  JobManagerOptions options_;
  RendezvousOptions windows_;
  std::map<std::string, std::shared_ptr<FakeChannel>> channels_;
};

TEST_F(JobManagerTest, TwoNodesRunToSuccess) {
  std::unique_ptr<JobManager> job = Submit("2");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kRendezvous);
  EXPECT_TRUE(job->AcceptingNodes());

  Join(*job, "a");
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(job->Status().rendezvous().missing_for_min(), 1u);
  Join(*job, "b");  // MAX joined: complete at once
  EXPECT_EQ(job->phase(), JobPhase::kRunning);
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kRunning);
  EXPECT_THAT(job->nodes(), ElementsAre("id-a", "id-b"));

  ASSERT_EQ(Channel("a").Starts().size(), 1u);
  ASSERT_EQ(Channel("b").Starts().size(), 1u);
  const v1::StartRanks a = Channel("a").Starts()[0];
  const v1::StartRanks b = Channel("b").Starts()[0];
  EXPECT_EQ(a.job_id(), job->id());
  EXPECT_EQ(a.generation(), 0);
  EXPECT_EQ(a.world_size(), 2u);
  EXPECT_EQ(a.base_dir(), "/shared/jobs");
  EXPECT_THAT(a.job_yaml(), HasSubstr("name: sst2"));
  EXPECT_EQ(a.common_env().at("WORLD_SIZE"), "2");
  EXPECT_EQ(a.common_env().at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(a.common_env().at("MASTER_PORT"), "29555");
  EXPECT_EQ(a.common_env().at("TORCHELASTIC_RESTART_COUNT"), "0");
  EXPECT_EQ(a.common_env().at("RINGMASTER_COORDINATOR"), "coord:7070");
  ASSERT_EQ(a.ranks_size(), 1);
  EXPECT_EQ(a.ranks(0).global_rank(), 0u);
  EXPECT_EQ(a.ranks(0).env().at("RANK"), "0");
  ASSERT_EQ(b.ranks_size(), 1);
  EXPECT_EQ(b.ranks(0).env().at("RANK"), "1");
  EXPECT_EQ(b.ranks(0).env().at("GROUP_RANK"), "1");

  // Progress: rank 0 gives step, loss and the checkpoint; samples/s come from its step counter
  // over time (steps x global batch 32), not from the ranks' own rates.
  v1::RankProgress p0 = Report(*job, 0, v1::RANK_PROCESS_STATE_RUNNING);
  p0.set_step(8);
  p0.set_total_steps(100);
  p0.set_loss(0.7);
  p0.set_samples_per_second(8);
  ASSERT_TRUE(job->OnRankReport("id-a", p0).ok());
  EXPECT_DOUBLE_EQ(job->Status().samples_per_second(), 0);  // one point: no rate yet
  clock_.Advance(absl::Seconds(4));
  p0.set_step(10);
  p0.set_loss(0.5);
  p0.set_committed_step(5);
  ASSERT_TRUE(job->OnRankReport("id-a", p0).ok());
  v1::RankProgress p1 = Report(*job, 1, v1::RANK_PROCESS_STATE_RUNNING);
  p1.set_samples_per_second(8);
  ASSERT_TRUE(job->OnRankReport("id-b", p1).ok());
  // A report naming a rank that runs elsewhere is not believed.
  v1::RankProgress wrong = Report(*job, 1, v1::RANK_PROCESS_STATE_RUNNING);
  wrong.set_samples_per_second(1000);
  ASSERT_TRUE(job->OnRankReport("id-a", wrong).ok());
  // Rank 0 reporting the same step again later changes nothing.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(job->OnRankReport("id-a", p0).ok());
  v1::JobStatus s = job->Status();
  EXPECT_EQ(s.phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(s.step(), 10);
  EXPECT_EQ(s.total_steps(), 100);
  EXPECT_DOUBLE_EQ(s.loss(), 0.5);
  EXPECT_DOUBLE_EQ(s.samples_per_second(), 16);
  EXPECT_EQ(s.eta().seconds(), 90 * 32 / 16);  // 90 steps of 32 samples at 16 samples/s
  EXPECT_EQ(s.world_size(), 2u);
  EXPECT_EQ(s.num_nodes(), 2u);
  EXPECT_EQ(s.committed_step(), 5);
  EXPECT_EQ(Stored(*job).committed_step, 5);

  Exit(*job, "a", 0, 0);
  EXPECT_EQ(job->phase(), JobPhase::kRunning);  // rank 1 still runs
  Exit(*job, "a", 0, 0);                        // repeated report: no double counting
  EXPECT_EQ(job->phase(), JobPhase::kRunning);
  Exit(*job, "b", 1, 0);
  EXPECT_EQ(job->phase(), JobPhase::kSucceeded);
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kSucceeded);
  EXPECT_THAT(job->nodes(), IsEmpty());
  EXPECT_EQ(job->Status().phase(), v1::JOB_PHASE_SUCCEEDED);
  EXPECT_THAT(Channel("a").StopGenerations(), IsEmpty());
}

// The job's last step and its loss come from rank 0's exit report together: a run that ends
// (early stopping, a fast job) many steps after the last report seen running does not show
// the new step with the old step's loss.
TEST_F(JobManagerTest, TheFinalStepAndItsLossComeFromTheExitReport) {
  std::unique_ptr<JobManager> job = Submit("1");
  Join(*job, "a");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  v1::RankProgress running = Report(*job, 0, v1::RANK_PROCESS_STATE_RUNNING);
  running.set_step(28);
  running.set_total_steps(120);
  running.set_loss(0.531);
  ASSERT_TRUE(job->OnRankReport("id-a", running).ok());
  v1::RankProgress exited = Report(*job, 0, v1::RANK_PROCESS_STATE_EXITED);
  exited.set_step(40);
  exited.set_total_steps(120);
  exited.set_loss(0.0123);
  ASSERT_TRUE(job->OnRankReport("id-a", exited).ok());
  const v1::JobStatus s = job->Status();
  EXPECT_EQ(s.phase(), v1::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(s.step(), 40);
  EXPECT_DOUBLE_EQ(s.loss(), 0.0123);
}

// Job throughput is rank 0's steps over the last 30 s times the global batch: it follows a change
// of pace within the window and ignores the ranks' own rates (measured at other moments).
TEST_F(JobManagerTest, ThroughputIsAWindowOverRankZerosStepCounter) {
  std::unique_ptr<JobManager> job = Submit("2");
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  int64_t step = 0;
  auto advance = [&](int seconds, int steps_per_second) {
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(absl::Seconds(1));
      step += steps_per_second;
      v1::RankProgress p0 = Report(*job, 0, v1::RANK_PROCESS_STATE_RUNNING);
      p0.set_step(step);
      p0.set_total_steps(100000);
      p0.set_samples_per_second(1);
      ASSERT_TRUE(job->OnRankReport("id-a", p0).ok());
      v1::RankProgress p1 = Report(*job, 1, v1::RANK_PROCESS_STATE_RUNNING);
      p1.set_samples_per_second(i % 2 == 0 ? 1000 : 0);  // noise the job's figure must not see
      ASSERT_TRUE(job->OnRankReport("id-b", p1).ok());
    }
  };
  advance(10, 1);
  EXPECT_DOUBLE_EQ(job->Status().samples_per_second(), 32);  // 1 step of 32 samples a second
  advance(40, 2);  // the window now holds only the faster pace
  EXPECT_DOUBLE_EQ(job->Status().samples_per_second(), 64);
}

TEST_F(JobManagerTest, RankFailureRestartsWithNextGeneration) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);

  Exit(*job, "b", 1, 1, "RuntimeError: gloo connection reset");
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(job->generation(), 1);
  EXPECT_THAT(Channel("a").StopGenerations(), ElementsAre(0));
  EXPECT_THAT(Channel("b").StopGenerations(), ElementsAre(0));
  EXPECT_THAT(job->nodes(), IsEmpty());
  v1::JobStatus s = job->Status();
  EXPECT_EQ(s.restarts(), 1u);
  EXPECT_EQ(s.max_restarts(), 3u);
  EXPECT_EQ(s.last_failure(), v1::FAILURE_KIND_RANK_EXITED);
  EXPECT_THAT(s.error(), HasSubstr("rank 1 on id-b exited with code 1: RuntimeError"));
  const JobRecord stored = Stored(*job);
  EXPECT_EQ(stored.state.generation, 1);
  EXPECT_EQ(stored.state.restarts, 1);
  EXPECT_EQ(stored.state.phase, JobPhase::kRendezvous);

  // The other rank's exit of the dead generation changes nothing.
  v1::RankProgress late;
  late.set_job_id(job->id());
  late.set_generation(0);
  late.set_global_rank(0);
  late.set_state(v1::RANK_PROCESS_STATE_SIGNALED);
  ASSERT_TRUE(job->OnRankReport("id-a", late).ok());
  EXPECT_EQ(job->generation(), 1);

  Join(*job, "a");
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  ASSERT_EQ(Channel("a").Starts().size(), 2u);
  const v1::StartRanks again = Channel("a").Starts()[1];
  EXPECT_EQ(again.generation(), 1);
  EXPECT_EQ(again.common_env().at("TORCHELASTIC_RESTART_COUNT"), "1");
  EXPECT_EQ(again.common_env().at("RINGMASTER_GENERATION"), "1");
}

// A collective timeout names only the peer it gave up on; the failure recorded for the
// restart also names, from the stall seen before it, the ranks that held the collective up and
// which of them were stopped (issue #8: "a rank hung with SIGSTOP ... found by the collective
// timeout and named"). A stall that resolved itself is not blamed for a later failure.
TEST_F(JobManagerTest, RankFailureNamesTheRanksThatHeldTheCollectiveUp) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  auto traced = [&](int rank, uint64_t seq, bool inside, bool stopped) {
    v1::RankProgress r = Report(*job, rank, v1::RANK_PROCESS_STATE_RUNNING);
    r.set_has_trace(true);
    r.set_collective_seq(seq);
    r.set_collective_op("AllReduceSum");
    r.set_in_collective(inside);
    r.set_process_stopped(stopped);
    SetTimestamp(clock_.Now(), r.mutable_collective_entered_at());
    return r;
  };
  ASSERT_TRUE(job->OnRankReport("id-a", traced(0, 12, true, false)).ok());
  ASSERT_TRUE(job->OnRankReport("id-b", traced(1, 11, false, true)).ok());
  clock_.Advance(options_.stall_after + absl::Seconds(1));
  ASSERT_TRUE(job->Tick().ok());
  ASSERT_TRUE(job->Stall().has_value());
  // Rank 0's collective times out: it leaves the collective, then exits.
  ASSERT_TRUE(job->OnRankReport("id-a", traced(0, 12, false, false)).ok());
  ASSERT_TRUE(job->Tick().ok());
  EXPECT_FALSE(job->Stall().has_value());
  Exit(*job, "a", 0, 1, "Gloo AllReduceSum #12 on rank 0 of 2 failed: Timed out");
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  const std::string error = job->Status().error();
  EXPECT_THAT(error, HasSubstr("rank 0 on id-a exited with code 1: Gloo AllReduceSum #12"));
  EXPECT_THAT(error, HasSubstr("[before the failure, rank(s) 0 waited inside collective #12 "
                               "(AllReduceSum) that rank(s) 1 had not entered; rank(s) 1 "
                               "stopped (SIGSTOP)]"));
  EXPECT_THAT(Stored(*job).state.error, HasSubstr("rank(s) 1 stopped (SIGSTOP)"));

  // Generation 1: a stall that resolves (rank 1 enters and runs) is forgotten.
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  ASSERT_TRUE(job->OnRankReport("id-a", traced(0, 3, true, false)).ok());
  ASSERT_TRUE(job->OnRankReport("id-b", traced(1, 2, false, false)).ok());
  clock_.Advance(options_.stall_after + absl::Seconds(1));
  ASSERT_TRUE(job->Tick().ok());
  ASSERT_TRUE(job->Stall().has_value());
  ASSERT_TRUE(job->OnRankReport("id-b", traced(1, 3, true, false)).ok());
  ASSERT_TRUE(job->Tick().ok());
  Exit(*job, "b", 1, 1, "segfault later");
  EXPECT_THAT(job->Status().error(), HasSubstr("segfault later"));
  EXPECT_THAT(job->Status().error(), Not(HasSubstr("before the failure")));
}

TEST_F(JobManagerTest, ExitThreeBeforeFirstStepFailsWithoutRestart) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  Exit(*job, "a", 0, 3, "job.yaml: data.train: /shared/jobs/data/train.tsv: no such file");
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->generation(), 0);
  v1::JobStatus s = job->Status();
  EXPECT_EQ(s.restarts(), 0u);
  EXPECT_EQ(s.last_failure(), v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  EXPECT_THAT(s.error(), HasSubstr("data/train.tsv: no such file"));
  EXPECT_THAT(s.error(), HasSubstr("not restarted"));
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kFailed);
  EXPECT_THAT(Channel("b").StopGenerations(), ElementsAre(0));
  // Later reports (rank 1 exiting too) change nothing.
  Exit(*job, "b", 1, 3);
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->Status().restarts(), 0u);
}

TEST_F(JobManagerTest, ExitThreeAfterProgressIsAnOrdinaryFailure) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  v1::RankProgress p = Report(*job, 0, v1::RANK_PROCESS_STATE_RUNNING);
  p.set_step(3);
  ASSERT_TRUE(job->OnRankReport("id-a", p).ok());
  Exit(*job, "b", 1, 3);
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(job->Status().restarts(), 1u);
}

TEST_F(JobManagerTest, AgentMarkedDeterministicFailureFailsAtOnce) {
  std::unique_ptr<JobManager> job = Submit("1", 3);
  Join(*job, "a");
  v1::RankProgress r = Report(*job, 0, v1::RANK_PROCESS_STATE_EXITED, 2);
  r.set_failure_kind(v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  ASSERT_TRUE(job->OnRankReport("id-a", r).ok());
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
}

TEST_F(JobManagerTest, RefusalToStartMarkedDeterministicFailsAtOnce) {
  // The agent could not prepare the generation (a path outside its --allowed-root).
  std::unique_ptr<JobManager> job = Submit("1", 3);
  Join(*job, "a");
  v1::RankProgress r = Report(*job, 0, v1::RANK_PROCESS_STATE_FAILED_TO_START);
  r.set_failure_kind(v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  r.set_last_error_line("output.dir '/x' resolves to '/x', outside the allowed roots");
  ASSERT_TRUE(job->OnRankReport("id-a", r).ok());
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->Status().restarts(), 0u);
  EXPECT_THAT(job->Status().error(), HasSubstr("deterministic_startup: rank 0 on id-a failed to "
                                               "start: output.dir '/x'"));
  // Unmarked (the trainer binary could not be executed): restarted as before.
  std::unique_ptr<JobManager> other = Submit("1", 3);
  Join(*other, "a");
  ASSERT_TRUE(
      other->OnRankReport("id-a", Report(*other, 0, v1::RANK_PROCESS_STATE_FAILED_TO_START)).ok());
  EXPECT_EQ(other->Status().restarts(), 1u);
}

TEST_F(JobManagerTest, LostNodeRestartsOnTheRemainingNodesWhenEnough) {
  std::unique_ptr<JobManager> job = Submit("1:2", 3);
  Join(*job, "a");
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);  // last call for a second node
  Join(*job, "b");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);

  ASSERT_TRUE(job->NodeLost("id-b", "no heartbeat for 10s").ok());
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(job->generation(), 1);
  EXPECT_EQ(job->Status().last_failure(), v1::FAILURE_KIND_NODE_LOST);
  EXPECT_THAT(job->Status().error(), HasSubstr("node id-b lost: no heartbeat"));
  EXPECT_THAT(Channel("a").StopGenerations(), ElementsAre(0));
  EXPECT_THAT(Channel("b").StopGenerations(), IsEmpty());  // it is gone

  Join(*job, "a");  // MIN = 1: last call
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  ASSERT_TRUE(job->NextDeadline().has_value());
  EXPECT_EQ(*job->NextDeadline(), clock_.Now() + absl::Seconds(5));
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(job->Tick().ok());
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  ASSERT_EQ(Channel("a").Starts().size(), 2u);
  EXPECT_EQ(Channel("a").Starts()[1].world_size(), 1u);
  EXPECT_EQ(Channel("a").Starts()[1].generation(), 1);
  EXPECT_EQ(job->Status().world_size(), 1u);
}

TEST_F(JobManagerTest, LostNodeBelowMinWaitsInRendezvous) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_TRUE(job->NodeLost("id-b", "no heartbeat").ok());
  Join(*job, "a");
  clock_.Advance(absl::Seconds(60));
  ASSERT_TRUE(job->Tick().ok());
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);  // one of two: waits
  EXPECT_EQ(job->Status().rendezvous().missing_for_min(), 1u);
  EXPECT_THAT(job->Status().rendezvous().joined_node_ids(), ElementsAre("id-a"));
  Join(*job, "b");  // back
  EXPECT_EQ(job->phase(), JobPhase::kRunning);
  EXPECT_EQ(job->generation(), 1);
}

TEST_F(JobManagerTest, NodeLostDuringRendezvousLeavesIt) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  ASSERT_TRUE(job->NodeLost("id-a", "gone").ok());
  EXPECT_THAT(job->nodes(), IsEmpty());
  EXPECT_EQ(job->Status().rendezvous().missing_for_min(), 2u);
  EXPECT_EQ(job->generation(), 0);
  EXPECT_EQ(job->Status().restarts(), 0u);
}

TEST_F(JobManagerTest, RendezvousTimeoutFails) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  clock_.Advance(absl::Seconds(300));
  ASSERT_TRUE(job->Tick().ok());
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->Status().last_failure(), v1::FAILURE_KIND_RENDEZVOUS_TIMEOUT);
  EXPECT_THAT(job->Status().error(), HasSubstr("1 more needed"));
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kFailed);
  EXPECT_THAT(job->nodes(), IsEmpty());
}

TEST_F(JobManagerTest, RestartBudgetExhaustedFails) {
  std::unique_ptr<JobManager> job = Submit("1", 1);
  Join(*job, "a");
  Exit(*job, "a", 0, 1);
  ASSERT_EQ(job->phase(), JobPhase::kRendezvous);
  Join(*job, "a");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  v1::RankProgress killed = Report(*job, 0, v1::RANK_PROCESS_STATE_SIGNALED);
  killed.set_signal(9);
  ASSERT_TRUE(job->OnRankReport("id-a", killed).ok());
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->generation(), 1);
  EXPECT_THAT(job->Status().error(), HasSubstr("restart limit reached"));
  EXPECT_THAT(job->Status().error(), HasSubstr("killed by signal 9"));
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kFailed);
  EXPECT_EQ(Stored(*job).state.restarts, 1);
  EXPECT_THAT(Channel("a").StopGenerations(), ElementsAre(0, 1));
}

// Issue #31: a SIGSEGV before the first step (a file the trainer crashes on) spent every
// restart on the same crash; it fails the job at once. After progress, or for SIGKILL, it is a
// restart as before.
TEST_F(JobManagerTest, FaultBeforeTheFirstStepFailsWithoutRestart) {
  std::unique_ptr<JobManager> job = Submit("1", 1);
  Join(*job, "a");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  v1::RankProgress crashed = Report(*job, 0, v1::RANK_PROCESS_STATE_SIGNALED);
  crashed.set_signal(SIGSEGV);
  ASSERT_TRUE(job->OnRankReport("id-a", crashed).ok());
  EXPECT_EQ(job->phase(), JobPhase::kFailed);
  EXPECT_EQ(job->Status().last_failure(), v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  EXPECT_THAT(job->Status().error(), HasSubstr("killed by signal 11 before the first step"));
  EXPECT_EQ(Stored(*job).state.restarts, 0);
}

TEST_F(JobManagerTest, FaultAfterProgressOrKillBeforeItRestarts) {
  std::unique_ptr<JobManager> job = Submit("1", 3);
  Join(*job, "a");
  v1::RankProgress killed = Report(*job, 0, v1::RANK_PROCESS_STATE_SIGNALED);
  killed.set_signal(SIGKILL);
  ASSERT_TRUE(job->OnRankReport("id-a", killed).ok());
  ASSERT_EQ(job->phase(), JobPhase::kRendezvous);
  Join(*job, "a");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  v1::RankProgress running = Report(*job, 0, v1::RANK_PROCESS_STATE_RUNNING);
  running.set_step(3);
  ASSERT_TRUE(job->OnRankReport("id-a", running).ok());
  v1::RankProgress crashed = Report(*job, 0, v1::RANK_PROCESS_STATE_SIGNALED);
  crashed.set_signal(SIGSEGV);
  ASSERT_TRUE(job->OnRankReport("id-a", crashed).ok());
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_EQ(Stored(*job).state.restarts, 2);
}

TEST_F(JobManagerTest, RefusedStartRanksFailsTheGeneration) {
  std::unique_ptr<JobManager> job = Submit("1", 2);
  Join(*job, "a");
  const uint64_t start_id = Channel("a").sent.back().command_id();
  ASSERT_TRUE(job->OnCommandError("id-a", start_id + 1000, "unrelated").ok());
  EXPECT_EQ(job->phase(), JobPhase::kRunning);
  ASSERT_TRUE(job->OnCommandError("id-a", start_id, "env name 'x y' is not [A-Z0-9_]+").ok());
  EXPECT_EQ(job->phase(), JobPhase::kRendezvous);
  EXPECT_THAT(job->Status().error(), HasSubstr("refused to start generation 0"));
}

TEST_F(JobManagerTest, CancelStopsRanksOnce) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  Join(*job, "b");
  ASSERT_TRUE(job->Cancel("user asked").ok());
  EXPECT_EQ(job->phase(), JobPhase::kCancelled);
  EXPECT_THAT(Channel("a").StopGenerations(), ElementsAre(0));
  EXPECT_THAT(Channel("b").StopGenerations(), ElementsAre(0));
  EXPECT_THAT(job->Status().error(), HasSubstr("user asked"));
  EXPECT_EQ(Stored(*job).state.phase, JobPhase::kCancelled);
  ASSERT_TRUE(job->Cancel("again").ok());  // harmless, unchanged
  EXPECT_THAT(job->Status().error(), HasSubstr("user asked"));
  EXPECT_EQ(Channel("a").sent.size(), 2u);
}

TEST_F(JobManagerTest, CancelDuringRendezvousSendsNothing) {
  std::unique_ptr<JobManager> job = Submit("2", 3);
  Join(*job, "a");
  ASSERT_TRUE(job->Cancel("").ok());
  EXPECT_EQ(job->phase(), JobPhase::kCancelled);
  EXPECT_THAT(Channel("a").sent, IsEmpty());
}

TEST_F(JobManagerTest, RestoreMovesARunningJobToTheNextGeneration) {
  std::unique_ptr<JobManager> job = Submit("1", 3);
  Join(*job, "a");
  ASSERT_EQ(job->phase(), JobPhase::kRunning);
  const std::string id = job->id();
  job.reset();  // the coordinator went away

  absl::StatusOr<std::unique_ptr<JobManager>> restored =
      JobManager::Restore(*db_->GetJob(id), windows_, options_, *db_, clock_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  JobManager& r = **restored;
  EXPECT_EQ(r.phase(), JobPhase::kRendezvous);
  EXPECT_EQ(r.generation(), 1);
  EXPECT_EQ(r.Status().restarts(), 0u);  // not the job's fault
  EXPECT_THAT(r.Status().error(), HasSubstr("coordinator restarted"));
  EXPECT_EQ(Stored(r).state.generation, 1);
  EXPECT_EQ(Stored(r).state.phase, JobPhase::kRendezvous);
  Join(r, "a");
  EXPECT_EQ(r.phase(), JobPhase::kRunning);
  EXPECT_EQ(Channel("a").Starts().back().generation(), 1);
}

TEST_F(JobManagerTest, RestoreKeepsRendezvousAndEndedJobs) {
  std::unique_ptr<JobManager> waiting = Submit("2", 3);
  std::unique_ptr<JobManager> done = Submit("1", 3);
  Join(*done, "a");
  Exit(*done, "a", 0, 0);
  ASSERT_EQ(done->phase(), JobPhase::kSucceeded);

  auto w = JobManager::Restore(*db_->GetJob(waiting->id()), windows_, options_, *db_, clock_);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->phase(), JobPhase::kRendezvous);
  EXPECT_EQ((*w)->generation(), 0);
  EXPECT_TRUE((*w)->AcceptingNodes());
  auto d = JobManager::Restore(*db_->GetJob(done->id()), windows_, options_, *db_, clock_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->phase(), JobPhase::kSucceeded);
  EXPECT_FALSE((*d)->AcceptingNodes());
  EXPECT_EQ((*d)->Status().name(), "sst2");
}

}  // namespace
}  // namespace ringmaster::coordinator
