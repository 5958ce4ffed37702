#include "agent/rank_supervisor.h"

#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/fake_launcher.h"
#include "common/file_util.h"
#include "common/rank_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kJob[] = R"(name: t
model:
  config: {hidden_size: 32, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 64}
  vocab: data/vocab.txt
data: {train: data/train.tsv, eval: data/dev.tsv}
train: {max_steps: 10, global_batch_size: 8, micro_batch_size: 4}
output: {dir: out}
)";

class RankSupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rank_supervisor_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    SupervisorOptions o;
    o.trainer_path = "/opt/ringmaster/bin/ringmaster-trainer";
    o.work_dir = (dir_ / "work").string();
    o.cpu_cores = 8;
    o.default_grace = absl::Seconds(30);
    o.keep_ended = absl::Minutes(1);
    sup_ = std::make_unique<RankSupervisor>(o, &launcher_, [](const std::string& name) {
      if (name == "PATH") return std::optional<std::string>("/usr/bin");
      if (name == "RINGMASTER_EMULATED_CUDA_OK") return std::optional<std::string>("1");
      return std::optional<std::string>();
    });
  }
  void TearDown() override { fs::remove_all(dir_); }

  v1::StartRanks Cmd(int64_t generation, int nranks = 2) {
    v1::StartRanks c;
    c.set_job_id("job-1");
    c.set_generation(generation);
    c.set_job_yaml(kJob);
    c.set_base_dir("/shared/jobs");
    c.set_world_size(4);
    (*c.mutable_common_env())["WORLD_SIZE"] = "4";
    (*c.mutable_common_env())["MASTER_ADDR"] = "10.0.0.1";
    for (int i = 0; i < nranks; ++i) {
      v1::RankLaunch* r = c.add_ranks();
      r->set_global_rank(2 + i);
      r->set_local_rank(i);
      (*r->mutable_env())["RANK"] = std::to_string(2 + i);
      (*r->mutable_env())["LOCAL_RANK"] = std::to_string(i);
    }
    return c;
  }
  v1::StopRanks Stop(int64_t generation, int grace_s) {
    v1::StopRanks s;
    s.set_job_id("job-1");
    s.set_generation(generation);
    s.mutable_grace_period()->set_seconds(grace_s);
    return s;
  }

  fs::path dir_;
  FakeLauncher launcher_;
  std::unique_ptr<RankSupervisor> sup_;
  absl::Time t_ = absl::FromUnixSeconds(1'700'000'000);
};

TEST_F(RankSupervisorTest, StartsOnlyTheConfiguredTrainerWithTheCommandsEnvironment) {
  absl::StatusOr<bool> r = sup_->Start(7, Cmd(0), t_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  ASSERT_EQ(launcher_.started.size(), 2u);
  const LaunchSpec& s = launcher_.started[1].spec;
  const std::string job_file = (dir_ / "work/jobs/job-1/gen-0/job.yaml").string();
  EXPECT_THAT(s.argv,
              ElementsAre("/opt/ringmaster/bin/ringmaster-trainer", "train", "--config", job_file));
  EXPECT_EQ(s.env.at("RANK"), "3");
  EXPECT_EQ(s.env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(s.env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(s.env.at("PATH"), "/usr/bin");
  // An emulated test build's opt-in to CUDA jobs comes from the agent's own environment.
  EXPECT_EQ(s.env.at("RINGMASTER_EMULATED_CUDA_OK"), "1");
  EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), "4");  // 8 cores, 2 local ranks
  EXPECT_EQ(s.log_path, (dir_ / "work/jobs/job-1/gen-0/rank-3.log").string());
  // The job file is the spec resolved against base_dir.
  absl::StatusOr<std::string> written = ReadFile(job_file);
  ASSERT_TRUE(written.ok());
  EXPECT_THAT(*written, HasSubstr("/shared/jobs/data/train.tsv"));
  EXPECT_THAT(*written, HasSubstr("/shared/jobs/out"));
  // At-least-once delivery: the same command again starts nothing.
  ASSERT_TRUE(sup_->Start(7, Cmd(0), t_).ok());
  EXPECT_EQ(launcher_.started.size(), 2u);
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].state(), v1::RANK_PROCESS_STATE_STARTING);
  EXPECT_EQ(rep[0].global_rank(), 2u);
  EXPECT_EQ(rep[0].pid(), launcher_.started[0].pid);
  EXPECT_EQ(rep[0].total_steps(), 10);
}

TEST_F(RankSupervisorTest, EachRankSeesOnlyItsAssignedGpu) {
  v1::StartRanks cmd = Cmd(0, 3);
  cmd.mutable_ranks(0)->set_gpu_index(3);
  cmd.mutable_ranks(1)->set_gpu_index(1);
  cmd.mutable_ranks(2)->set_gpu_index(-1);  // a CPU rank
  cmd.set_world_size(5);                    // global ranks 2..4
  (*cmd.mutable_common_env())["WORLD_SIZE"] = "5";
  absl::StatusOr<bool> started = sup_->Start(7, cmd, t_);
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_EQ(launcher_.started.size(), 3u);
  EXPECT_EQ(launcher_.started[0].spec.env.at("CUDA_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(launcher_.started[1].spec.env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(launcher_.started[2].spec.env.at("CUDA_VISIBLE_DEVICES"), "");

  // The inventory counts the GPUs the agent sees; under its own CUDA_VISIBLE_DEVICES index i is
  // the i-th entry there.
  EXPECT_EQ(VisibleDevicesFor(1, std::string("4,6,7")), "6");
  EXPECT_EQ(VisibleDevicesFor(0, std::string("GPU-1b2c")), "GPU-1b2c");
  EXPECT_EQ(VisibleDevicesFor(2, std::nullopt), "2");
  EXPECT_EQ(VisibleDevicesFor(-1, std::string("0,1")), "");

  // The coordinator cannot choose it for a rank: the agent does.
  v1::StartRanks sneaky = Cmd(1, 1);
  (*sneaky.mutable_ranks(0)->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0,1,2,3";
  EXPECT_EQ(sup_->Start(8, sneaky, t_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RankSupervisorTest, RefusesBadCommandsWithoutStartingAnything) {
  v1::StartRanks bad_env = Cmd(0);
  (*bad_env.mutable_common_env())["LD_PRELOAD;x"] = "/tmp/evil.so";
  EXPECT_THAT(std::string(sup_->Start(1, bad_env, t_).status().message()),
              HasSubstr("LD_PRELOAD;x"));
  v1::StartRanks bad_id = Cmd(0);
  bad_id.set_job_id("../../etc");
  EXPECT_FALSE(sup_->Start(2, bad_id, t_).ok());
  v1::StartRanks bad_rank = Cmd(0);
  bad_rank.mutable_ranks(0)->set_global_rank(9);
  EXPECT_FALSE(sup_->Start(3, bad_rank, t_).ok());
  EXPECT_TRUE(launcher_.started.empty());
}

TEST_F(RankSupervisorTest, SpecErrorsFailEveryRankAsDeterministic) {
  v1::StartRanks c = Cmd(0);
  c.set_job_yaml("name: t\nbogus_key: 1\n");
  absl::StatusOr<bool> r = sup_->Start(1, c, t_);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(launcher_.started.empty());
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].state(), v1::RANK_PROCESS_STATE_FAILED_TO_START);
  EXPECT_EQ(rep[0].failure_kind(), v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  EXPECT_THAT(rep[0].last_error_line(), HasSubstr("bogus_key"));
}

TEST_F(RankSupervisorTest, ReservedEnvironmentVariablesAreRefused) {
  for (const char* name :
       {"LD_PRELOAD", "LD_LIBRARY_PATH", "PATH", "RINGMASTER_STATUS_FILE", "GCONV_PATH",
        "NCCL_NET_PLUGIN", "OMP_TOOL_LIBRARIES", "RINGMASTER_EMULATED_CUDA_OK"}) {
    v1::StartRanks common = Cmd(0);
    (*common.mutable_common_env())[name] = "/tmp/evil";
    const absl::Status s = sup_->Start(1, common, t_).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(name));
    v1::StartRanks per_rank = Cmd(0);
    (*per_rank.mutable_ranks(1)->mutable_env())[name] = "/tmp/evil";
    EXPECT_THAT(std::string(sup_->Start(2, per_rank, t_).status().message()),
                HasSubstr(absl::StrCat("rank 3: environment variable ", name)));
  }
  EXPECT_TRUE(launcher_.started.empty());
  for (const char* name : {"MASTER_ADDR", "RINGMASTER_RANK_WEIGHTS", "NCCL_SOCKET_IFNAME",
                           "OMP_NUM_THREADS", "LDX", "PATHS"}) {
    EXPECT_FALSE(ReservedEnvName(name)) << name;
  }
}

TEST_F(RankSupervisorTest, PathsOutsideTheAllowedRootsFailEveryRankAsDeterministic) {
  fs::create_directories(dir_ / "jobs" / "data");
  fs::create_directories(dir_ / "secret");
  SupervisorOptions o;
  o.trainer_path = "/opt/ringmaster/bin/ringmaster-trainer";
  o.work_dir = (dir_ / "work").string();
  o.allowed_roots = {(dir_ / "jobs").string()};
  auto confined = [&](const std::string& job_id, const std::string& yaml) {
    v1::StartRanks c = Cmd(0);
    c.set_job_id(job_id);
    c.set_job_yaml(yaml);
    c.set_base_dir((dir_ / "jobs").string());
    return c;
  };
  RankSupervisor sup(o, &launcher_, [](const std::string&) { return std::nullopt; });
  // Inside the root (output.dir does not exist yet): started.
  ASSERT_TRUE(sup.Start(1, confined("ok", kJob), t_).ok());
  EXPECT_EQ(launcher_.started.size(), 2u);
  launcher_.started.clear();

  std::string escape(kJob);
  escape.replace(escape.find("data/train.tsv"), 14, "../secret/train.tsv");
  absl::StatusOr<bool> r = sup.Start(2, confined("dotdot", escape), t_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("data.train"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr((dir_ / "jobs").string()));

  // A symlink inside the root that leads outside it (in place of the output.dir the agent
  // created for "ok", below the root and following no link).
  ASSERT_TRUE(fs::is_directory(dir_ / "jobs" / "out"));
  fs::remove_all(dir_ / "jobs" / "out");
  fs::create_directory_symlink(dir_ / "secret", dir_ / "jobs" / "out");
  r = sup.Start(3, confined("symlink", kJob), t_);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("output.dir"));
  EXPECT_TRUE(launcher_.started.empty());
  for (const v1::RankProgress& p : sup.Report(t_)) {
    if (p.job_id() == "ok") continue;
    EXPECT_EQ(p.state(), v1::RANK_PROCESS_STATE_FAILED_TO_START) << p.job_id();
    EXPECT_EQ(p.failure_kind(), v1::FAILURE_KIND_DETERMINISTIC_STARTUP) << p.job_id();
    EXPECT_THAT(p.last_error_line(), HasSubstr("outside the allowed roots"));
  }
  EXPECT_FALSE(fs::exists(dir_ / "work" / "jobs" / "symlink" / "gen-0" / "job.yaml"));
}

TEST_F(RankSupervisorTest, StopSendsTermThenKillAfterTheGracePeriod) {
  ASSERT_TRUE(sup_->Start(1, Cmd(0), t_).ok());
  const int p0 = launcher_.started[0].pid, p1 = launcher_.started[1].pid;
  ASSERT_TRUE(sup_->Stop(Stop(0, 10), t_).ok());
  EXPECT_THAT(launcher_.signals, ElementsAre(Pair(p0, SIGTERM), Pair(p1, SIGTERM)));
  launcher_.Exit(p0, 143);  // checkpointed and left
  EXPECT_TRUE(sup_->Tick(t_ + absl::Seconds(9)));
  EXPECT_EQ(launcher_.signals.size(), 2u);
  sup_->Tick(t_ + absl::Seconds(10));
  EXPECT_THAT(launcher_.signals.back(), Pair(p1, SIGKILL));
  sup_->Tick(t_ + absl::Seconds(11));
  EXPECT_EQ(launcher_.signals.size(), 3u);  // SIGKILL once
  launcher_.Kill(p1, SIGKILL);
  sup_->Tick(t_ + absl::Seconds(12));
  std::vector<v1::RankProgress> rep = sup_->Report(t_ + absl::Seconds(12));
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].state(), v1::RANK_PROCESS_STATE_STOPPED);
  EXPECT_EQ(rep[0].exit_code(), 143);
  EXPECT_EQ(rep[1].state(), v1::RANK_PROCESS_STATE_STOPPED);
  EXPECT_EQ(rep[1].signal(), SIGKILL);
  EXPECT_EQ(rep[1].last_error_line(), "");  // stopped on command: not a failure
  EXPECT_EQ(sup_->LiveRanks(), 0);
  // Ended ranks stay reported for keep_ended, then go.
  sup_->Tick(t_ + absl::Minutes(2));
  EXPECT_TRUE(sup_->Report(t_ + absl::Minutes(2)).empty());
}

// A stopped rank (SIGSTOP) would hold SIGTERM pending and sit out the grace period: it gets
// SIGCONT right after SIGTERM, and only it. Its reports say it is stopped.
TEST_F(RankSupervisorTest, StopContinuesAStoppedRankAfterSigterm) {
  ASSERT_TRUE(sup_->Start(1, Cmd(0), t_).ok());
  const int p0 = launcher_.started[0].pid, p1 = launcher_.started[1].pid;
  launcher_.stopped.insert(p1);
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_FALSE(rep[0].process_stopped());
  EXPECT_TRUE(rep[1].process_stopped());
  ASSERT_TRUE(sup_->Stop(Stop(0, 10), t_).ok());
  EXPECT_THAT(launcher_.signals,
              ElementsAre(Pair(p0, SIGTERM), Pair(p1, SIGTERM), Pair(p1, SIGCONT)));
  // A second StopRanks sends nothing new.
  ASSERT_TRUE(sup_->Stop(Stop(0, 10), t_ + absl::Seconds(1)).ok());
  EXPECT_EQ(launcher_.signals.size(), 3u);
}

TEST_F(RankSupervisorTest, ReportsExitsWithTheLastErrorLine) {
  ASSERT_TRUE(sup_->Start(1, Cmd(0), t_).ok());
  launcher_.Exit(launcher_.started[0].pid, 3, "t ERROR p: data/train.tsv: not found");
  launcher_.Kill(launcher_.started[1].pid, SIGSEGV);
  EXPECT_TRUE(sup_->Tick(t_));
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_EQ(rep[0].state(), v1::RANK_PROCESS_STATE_EXITED);
  EXPECT_EQ(rep[0].exit_code(), 3);
  EXPECT_EQ(rep[0].failure_kind(), v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
  EXPECT_THAT(rep[0].last_error_line(), HasSubstr("not found"));
  EXPECT_EQ(rep[1].state(), v1::RANK_PROCESS_STATE_SIGNALED);
  EXPECT_EQ(rep[1].signal(), SIGSEGV);
  EXPECT_EQ(rep[1].failure_kind(), v1::FAILURE_KIND_UNSPECIFIED);
}

TEST_F(RankSupervisorTest, ANewGenerationWaitsForTheOldRanksToEnd) {
  ASSERT_TRUE(sup_->Start(1, Cmd(0), t_).ok());
  absl::StatusOr<bool> r = sup_->Start(2, Cmd(1), t_);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);  // deferred: the old ranks are being stopped
  EXPECT_EQ(launcher_.signals.size(), 2u);
  EXPECT_EQ(launcher_.started.size(), 2u);
  sup_->Tick(t_);
  EXPECT_TRUE(sup_->TakeDeferredOutcomes().empty());
  launcher_.Exit(launcher_.started[0].pid, 143);
  launcher_.Exit(launcher_.started[1].pid, 143);
  EXPECT_TRUE(sup_->Tick(t_ + absl::Seconds(1)));
  auto outcomes = sup_->TakeDeferredOutcomes();
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].first, 2u);
  EXPECT_TRUE(outcomes[0].second.ok());
  EXPECT_EQ(launcher_.started.size(), 4u);
  std::vector<v1::RankProgress> rep = sup_->Report(t_ + absl::Seconds(1));
  ASSERT_EQ(rep.size(), 2u);  // the old generation is gone
  EXPECT_EQ(rep[0].generation(), 1);
}

TEST_F(RankSupervisorTest, RestartStopsThenStartsTheSameRank) {
  launcher_.end_on_signal = true;
  launcher_.term_exit_code = 143;
  ASSERT_TRUE(sup_->Start(1, Cmd(0), t_).ok());
  v1::RestartRank rr;
  rr.set_job_id("job-1");
  rr.set_generation(0);
  rr.set_global_rank(3);
  ASSERT_TRUE(sup_->Restart(rr, t_).ok());
  sup_->Tick(t_);
  ASSERT_EQ(launcher_.started.size(), 3u);
  EXPECT_EQ(launcher_.started[2].spec.env.at("RANK"), "3");
  EXPECT_TRUE(launcher_.Running(launcher_.started[2].pid));
  rr.set_global_rank(0);
  EXPECT_EQ(sup_->Restart(rr, t_).code(), absl::StatusCode::kNotFound);
}

TEST_F(RankSupervisorTest, LaunchFailureIsReported) {
  launcher_.fail_next_start = absl::FailedPreconditionError("cannot start x: No such file");
  ASSERT_TRUE(sup_->Start(1, Cmd(0, 1), t_).ok());
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 1u);
  EXPECT_EQ(rep[0].state(), v1::RANK_PROCESS_STATE_FAILED_TO_START);
  EXPECT_THAT(rep[0].last_error_line(), HasSubstr("No such file"));
}

TEST_F(RankSupervisorTest, LogTailReadsOnlyItsOwnRankLogs) {
  const fs::path job = dir_ / "work" / "jobs" / "job-7";
  fs::create_directories(job / "gen-0");
  fs::create_directories(job / "gen-2");
  ASSERT_TRUE(WriteFileAtomic((job / "gen-0" / "rank-1.log").string(), "old\n").ok());
  ASSERT_TRUE(
      WriteFileAtomic((job / "gen-2" / "rank-1.log").string(), "line one\nline two\n").ok());
  v1::SendLogs req;
  req.set_job_id("job-7");
  req.set_global_rank(1);
  req.set_generation(-1);  // the newest generation with that log
  req.set_max_bytes(9);
  v1::LogTail t = sup_->LogTail(5, req);
  EXPECT_EQ(t.command_id(), 5u);
  EXPECT_EQ(t.error(), "");
  EXPECT_EQ(t.generation(), 2);
  EXPECT_EQ(t.data(), "line two\n");
  EXPECT_TRUE(t.truncated());

  req.set_generation(0);
  req.set_max_bytes(0);
  t = sup_->LogTail(6, req);
  EXPECT_EQ(t.data(), "old\n");
  EXPECT_FALSE(t.truncated());

  req.set_global_rank(3);
  EXPECT_THAT(sup_->LogTail(7, req).error(), HasSubstr("no log of rank 3"));
  // A job id is a name, never a path.
  for (const char* bad : {"../job-7", "..", "", "job-7/../job-7", "/etc"}) {
    req.set_job_id(bad);
    req.set_global_rank(1);
    EXPECT_THAT(sup_->LogTail(8, req).error(), HasSubstr("is not a job id")) << bad;
  }
}

TEST_F(RankSupervisorTest, ReportsTheNewestCommittedCheckpoint) {
  v1::StartRanks c = Cmd(0);
  c.set_base_dir(dir_.string());           // output.dir "out" resolves to dir_/out
  c.mutable_ranks(0)->set_global_rank(0);  // only the node of rank 0 reports it
  (*c.mutable_ranks(0)->mutable_env())["RANK"] = "0";
  ASSERT_TRUE(sup_->Start(1, c, t_).ok());
  EXPECT_EQ(sup_->Report(t_)[0].committed_step(), 0);
  const fs::path ckpts = dir_ / "out" / "checkpoints";
  fs::create_directories(ckpts / "step-00000004");
  ASSERT_TRUE(WriteFileAtomic((ckpts / "step-00000004" / "manifest.json").string(), "{}").ok());
  fs::create_directories(ckpts / "step-00000008");  // no manifest yet: not committed
  EXPECT_EQ(sup_->Report(t_)[0].committed_step(), 4);
  ASSERT_TRUE(WriteFileAtomic((ckpts / "step-00000008" / "manifest.json").string(), "{}").ok());
  EXPECT_EQ(sup_->Report(t_)[1].committed_step(), 8);
  // A node without rank 0 does not scan the output directory.
  v1::StartRanks other = Cmd(1);
  other.set_job_id("job-2");
  other.set_base_dir(dir_.string());
  ASSERT_TRUE(sup_->Start(2, other, t_).ok());
  for (const v1::RankProgress& r : sup_->Report(t_)) {
    if (r.job_id() == "job-2") EXPECT_EQ(r.committed_step(), 0);
  }
}

// Each rank is told where to keep its status block; the report carries the collective it is in
// (the hang diagnosis input) once the trainer has written one, and nothing before.
TEST_F(RankSupervisorTest, ReportsTheCollectiveTraceFromEachRanksStatusFile) {
  ASSERT_TRUE(sup_->Start(7, Cmd(0), t_).ok());
  ASSERT_EQ(launcher_.started.size(), 2u);
  const std::string path = launcher_.started[1].spec.env.at("RINGMASTER_STATUS_FILE");
  EXPECT_EQ(path, (dir_ / "work/jobs/job-1/gen-0/rank-3.status").string());
  std::vector<v1::RankProgress> rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_FALSE(rep[1].has_trace());

  auto status = trainer::RankStatus::CreateFile(path);
  ASSERT_TRUE(status.ok()) << status.status();
  trainer::StepFigures f;
  f.step = 3;
  f.unix_time = 1'700'000'100;
  (*status)->OnStep(f, {});
  (*status)->OnEnter(17, trainer::Collective::kAllGather);
  (*status)->OnLeave(17, trainer::Collective::kAllGather, 0.25);
  (*status)->OnEnter(18, trainer::Collective::kReduceScatterSum);

  rep = sup_->Report(t_);
  ASSERT_EQ(rep.size(), 2u);
  EXPECT_FALSE(rep[0].has_trace());  // rank 2 has written nothing
  const v1::RankProgress& r = rep[1];
  EXPECT_TRUE(r.has_trace());
  EXPECT_EQ(r.collective_seq(), 18u);
  EXPECT_EQ(r.collective_op(), "ReduceScatterSum");
  EXPECT_TRUE(r.in_collective());
  EXPECT_GT(r.collective_entered_at().seconds(), 1'700'000'000);
  EXPECT_DOUBLE_EQ(r.comm_seconds(), 0.25);
  EXPECT_EQ(r.steps_this_process(), 1);
  EXPECT_EQ(r.last_step_at().seconds(), 1'700'000'100);

  const std::vector<RankSupervisor::StatusSource> sources = sup_->StatusSources();
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[1].job_id, "job-1");
  EXPECT_EQ(sources[1].global_rank, 3u);
  EXPECT_EQ(sources[1].path, path);
  EXPECT_EQ(sup_->launches(), 2u);
}

}  // namespace
}  // namespace ringmaster::agent
