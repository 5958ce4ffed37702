#include "agent/agent.h"

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>

#include "agent/fake_launcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;

// A stream the test feeds by hand; Read never blocks.
class FakeStream final : public HeartbeatStream {
 public:
  bool Write(const v1::AgentMessage& m) override {
    if (broken) return false;
    written.push_back(m);
    // As the coordinator does: a message it cannot parse (a `string` field that is not valid
    // UTF-8) ends the stream; the write itself has succeeded by then.
    if (v1::AgentMessage parsed; !parsed.ParseFromString(m.SerializeAsString())) broken = true;
    if (break_after_write) broken = true;
    if (m.ByteSizeLong() > (4u << 20)) broken = true;  // the coordinator's message limit
    return true;
  }
  std::optional<v1::CoordinatorMessage> Read(absl::Duration) override {
    if (inbox.empty()) return std::nullopt;
    v1::CoordinatorMessage m = inbox.front();
    inbox.pop_front();
    return m;
  }
  bool Broken() const override { return broken; }
  absl::Status Status() const override { return absl::UnavailableError("gone"); }

  std::deque<v1::CoordinatorMessage> inbox;
  std::vector<v1::AgentMessage> written;
  bool broken = false;
  bool break_after_write = false;
};

class FakeLink final : public CoordinatorLink {
 public:
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& r) override {
    registers.push_back(r);
    if (!up) return absl::UnavailableError("connection refused");
    v1::RegisterResponse resp;
    resp.set_node_id("node-7");
    resp.set_node_secret("secret-" + std::to_string(registers.size()));
    resp.mutable_heartbeat_interval()->set_seconds(5);
    return resp;
  }
  absl::StatusOr<std::unique_ptr<HeartbeatStream>> OpenHeartbeat() override {
    auto s = std::make_unique<FakeStream>();
    s->break_after_write = break_streams;
    stream = s.get();
    return std::unique_ptr<HeartbeatStream>(std::move(s));
  }
  std::vector<v1::RegisterRequest> registers;
  FakeStream* stream = nullptr;
  bool up = true;
  bool break_streams = false;  // every stream breaks right after its first message
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("agent_test_" + std::to_string(::getpid()));
    SupervisorOptions so;
    so.trainer_path = "/bin/trainer";
    so.work_dir = dir_.string();
    sup_ = std::make_unique<RankSupervisor>(so, &launcher_,
                                            [](const std::string&) { return std::nullopt; });
    AgentOptions ao;
    ao.inventory.set_node_name("box-1");
    agent_ = std::make_unique<Agent>(ao, &link_, sup_.get(), [this] { return now_; });
  }
  void TearDown() override { fs::remove_all(dir_); }

  v1::CoordinatorMessage StartCmd(uint64_t id) {
    v1::CoordinatorMessage m;
    m.set_command_id(id);
    v1::StartRanks* s = m.mutable_start_ranks();
    s->set_job_id("j1");
    s->set_job_yaml(
        "name: t\nmodel: {config: {hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 1, "
        "intermediate_size: 8}, vocab: v.txt}\ndata: {train: a.tsv, eval: b.tsv}\n"
        "output: {dir: o}\n");
    s->set_base_dir("/shared");
    s->set_world_size(1);
    s->add_ranks()->set_global_rank(0);
    return m;
  }

  fs::path dir_;
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  FakeLauncher launcher_;
  FakeLink link_;
  std::unique_ptr<RankSupervisor> sup_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentTest, RegistersAndOpensTheStreamWithAReport) {
  ASSERT_TRUE(agent_->Connect().ok());
  EXPECT_EQ(agent_->node_id(), "node-7");
  EXPECT_EQ(agent_->heartbeat_interval(), absl::Seconds(5));
  ASSERT_EQ(link_.registers.size(), 1u);
  EXPECT_EQ(link_.registers[0].inventory().node_name(), "box-1");
  EXPECT_EQ(link_.registers[0].agent_version().major(), 1u);
  EXPECT_EQ(link_.registers[0].previous_node_id(), "");
  ASSERT_EQ(link_.stream->written.size(), 1u);
  EXPECT_EQ(link_.stream->written[0].node_id(), "node-7");
  EXPECT_EQ(link_.stream->written[0].seq(), 1u);
}

// Issue #31: the coordinator gives a known name back only with the node's secret, so the agent
// keeps it in its work dir (0600) and a restarted agent registers with it.
TEST_F(AgentTest, ARestartedAgentRegistersWithTheSecretKeptInItsWorkDir) {
  fs::create_directories(dir_);
  AgentOptions ao;
  ao.inventory.set_node_name("box-1");
  ao.identity_file = (dir_ / "node-identity").string();
  {
    Agent first(ao, &link_, sup_.get(), [this] { return now_; });
    ASSERT_TRUE(first.Connect().ok());
    EXPECT_EQ(link_.registers.back().previous_node_secret(), "");
  }
  const fs::perms mode = fs::status(ao.identity_file).permissions();
  EXPECT_EQ(mode & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  Agent restarted(ao, &link_, sup_.get(), [this] { return now_; });
  EXPECT_EQ(restarted.node_id(), "node-7");
  ASSERT_TRUE(restarted.Connect().ok());
  EXPECT_EQ(link_.registers.back().previous_node_id(), "node-7");
  EXPECT_EQ(link_.registers.back().previous_node_secret(), "secret-1");
  // The file now holds the newest secret; another node name does not use it.
  ao.inventory.set_node_name("box-2");
  Agent other(ao, &link_, sup_.get(), [this] { return now_; });
  EXPECT_EQ(other.node_id(), "");
  ASSERT_TRUE(other.Connect().ok());
  EXPECT_EQ(link_.registers.back().previous_node_secret(), "");
}

TEST_F(AgentTest, CarriesOutCommandsAndAcksAtOnce) {
  ASSERT_TRUE(agent_->Connect().ok());
  link_.stream->inbox.push_back(StartCmd(41));
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  ASSERT_EQ(launcher_.started.size(), 1u);
  ASSERT_EQ(link_.stream->written.size(), 2u);
  const v1::AgentMessage& m = link_.stream->written[1];
  EXPECT_EQ(m.seq(), 2u);
  ASSERT_EQ(m.acked_command_ids_size(), 1);
  EXPECT_EQ(m.acked_command_ids(0), 41u);
  ASSERT_EQ(m.ranks_size(), 1);
  EXPECT_EQ(m.ranks(0).state(), v1::RANK_PROCESS_STATE_STARTING);
  // A refused command comes back as a CommandError.
  v1::CoordinatorMessage bad = StartCmd(42);
  bad.mutable_start_ranks()->set_job_id("j2");
  bad.mutable_start_ranks()->set_base_dir("relative");
  link_.stream->inbox.push_back(bad);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  ASSERT_EQ(link_.stream->written.back().command_errors_size(), 1);
  EXPECT_EQ(link_.stream->written.back().command_errors(0).command_id(), 42u);
}

TEST_F(AgentTest, ALaunchedRankSeesOnlyTheGpuItWasAssigned) {
  // A node with two GPUs (a fake inventory: device ordinals 2 and 5); the plan gives local rank i
  // the i-th GPU listed, as coordinator/plan/planner.h does.
  AgentOptions ao;
  ao.inventory.set_node_name("box-2");
  for (uint32_t ordinal : {2u, 5u}) {
    v1::GpuInfo* g = ao.inventory.add_gpus();
    g->set_index(ordinal);
    g->set_name("NVIDIA A100-SXM4-40GB");
    g->set_compute_capability_major(8);
  }
  agent_ = std::make_unique<Agent>(ao, &link_, sup_.get(), [this] { return now_; });
  ASSERT_TRUE(agent_->Connect().ok());
  v1::CoordinatorMessage m = StartCmd(51);
  v1::StartRanks* s = m.mutable_start_ranks();
  s->set_world_size(2);
  s->clear_ranks();
  for (int lr = 0; lr < 2; ++lr) {
    v1::RankLaunch* r = s->add_ranks();
    r->set_global_rank(lr);
    r->set_local_rank(lr);
    r->set_gpu_index(static_cast<int>(ao.inventory.gpus(lr).index()));
  }
  link_.stream->inbox.push_back(m);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  ASSERT_EQ(launcher_.started.size(), 2u);
  EXPECT_EQ(launcher_.started[0].spec.env.at("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(launcher_.started[1].spec.env.at("CUDA_VISIBLE_DEVICES"), "5");
}

TEST_F(AgentTest, ReportsEveryIntervalAndOnStateChanges) {
  ASSERT_TRUE(agent_->Connect().ok());
  link_.stream->inbox.push_back(StartCmd(1));
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  const size_t after_start = link_.stream->written.size();
  now_ += absl::Seconds(4);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  EXPECT_EQ(link_.stream->written.size(), after_start);  // nothing new, interval not up
  now_ += absl::Seconds(1);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  EXPECT_EQ(link_.stream->written.size(), after_start + 1);
  launcher_.Exit(launcher_.started[0].pid, 1, "t ERROR x: boom");
  now_ += absl::Milliseconds(10);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  ASSERT_EQ(link_.stream->written.size(), after_start + 2);
  const v1::RankProgress& r = link_.stream->written.back().ranks(0);
  EXPECT_EQ(r.state(), v1::RANK_PROCESS_STATE_EXITED);
  EXPECT_EQ(r.exit_code(), 1);
  EXPECT_EQ(r.last_error_line(), "t ERROR x: boom");
}

// Issue #31: a trainer error quoting the raw bytes of a hostile model file (config.json =
// "\xff\xfe{") made every report unreadable to the coordinator, which dropped the stream each
// time. The line is sent escaped (valid UTF-8, no control characters) and the stream holds.
TEST_F(AgentTest, AnErrorLineWithInvalidUtf8IsSentEscapedAndTheStreamHolds) {
  ASSERT_TRUE(agent_->Connect().ok());
  link_.stream->inbox.push_back(StartCmd(1));
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  launcher_.Exit(launcher_.started[0].pid, 3,
                 "t ERROR trainer: m/config.json: syntax error, last read: '\xff\xfe{' \x1b[2J\r");
  now_ += absl::Milliseconds(10);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  EXPECT_FALSE(link_.stream->broken);
  const v1::RankProgress& r = link_.stream->written.back().ranks(0);
  EXPECT_EQ(r.state(), v1::RANK_PROCESS_STATE_EXITED);
  EXPECT_EQ(r.last_error_line(),
            "t ERROR trainer: m/config.json: syntax error, last read: '\\xff\\xfe{' "
            "\\x1b[2J\\r");
  now_ += absl::Seconds(5);
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));  // and the next report goes out too
  EXPECT_FALSE(link_.stream->broken);
}

// Issue #31: a message the coordinator cannot take must not cost the stream. Four answers to
// SendLogs of 1 MiB each would make a report over its 4 MiB limit: their data is dropped, each
// says why, and the stream holds.
TEST_F(AgentTest, LogAnswersThatWouldOverflowTheReportAreDroppedNotTheStream) {
  fs::create_directories(dir_ / "jobs" / "j1" / "gen-0");
  {
    std::ofstream log(dir_ / "jobs" / "j1" / "gen-0" / "rank-0.log", std::ios::binary);
    log << std::string(size_t{3} << 19, 'x');  // 1.5 MiB
  }
  ASSERT_TRUE(agent_->Connect().ok());
  for (uint64_t id = 1; id <= 4; ++id) {
    v1::CoordinatorMessage m;
    m.set_command_id(id);
    m.mutable_send_logs()->set_job_id("j1");
    m.mutable_send_logs()->set_generation(0);
    link_.stream->inbox.push_back(m);
  }
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  EXPECT_FALSE(link_.stream->broken);
  const v1::AgentMessage& r = link_.stream->written.back();
  ASSERT_EQ(r.logs_size(), 4);
  for (const v1::LogTail& t : r.logs()) {
    EXPECT_EQ(t.data(), "");
    EXPECT_THAT(t.error(), ::testing::HasSubstr("was dropped"));
  }
  now_ += absl::Seconds(5);
  EXPECT_TRUE(agent_->Step(absl::ZeroDuration()));
}

// Issue #31: every stream broke right after the agent's first report and the agent registered
// again at once, ~390 times a second. Now a stream that breaks soon after it opened is followed by
// an exponential backoff (250 ms doubling to 10 s, with jitter): in a minute, a few registrations
// instead of thousands. Time is the test's clock: each reading costs 1 ms, each wait moves it.
TEST_F(AgentTest, AStreamThatKeepsBreakingIsReopenedWithBackoff) {
  link_.break_streams = true;
  const absl::Time start = now_;
  std::atomic<bool> stop{false};
  Agent agent(AgentOptions{}, &link_, sup_.get(), [&] {
    now_ += absl::Milliseconds(1);
    if (now_ - start >= absl::Minutes(1)) stop = true;
    return now_;
  });
  agent.set_sleep([&](absl::Duration d) { now_ += d; });
  agent.Run(&stop);
  // Waits of 0.25, 0.5, 1, 2, 4, 8, then 10 s, each times 0.5 to 1: 11 to 17 registrations in
  // a minute (before: one every few readings of the clock, thousands).
  EXPECT_GE(link_.registers.size(), 10u);
  EXPECT_LE(link_.registers.size(), 17u);
}

TEST_F(AgentTest, ReconnectsWithTheSameIdentityAndTheRanksKeepRunning) {
  ASSERT_TRUE(agent_->Connect().ok());
  link_.stream->inbox.push_back(StartCmd(1));
  ASSERT_TRUE(agent_->Step(absl::ZeroDuration()));
  link_.stream->broken = true;
  EXPECT_FALSE(agent_->Step(absl::ZeroDuration()));
  EXPECT_FALSE(agent_->connected());
  EXPECT_TRUE(launcher_.signals.empty());
  EXPECT_TRUE(launcher_.Running(launcher_.started[0].pid));
  link_.up = false;
  EXPECT_EQ(agent_->Connect().code(), absl::StatusCode::kUnavailable);
  link_.up = true;
  ASSERT_TRUE(agent_->Connect().ok());
  ASSERT_EQ(link_.registers.size(), 3u);
  EXPECT_EQ(link_.registers[2].previous_node_id(), "node-7");
  EXPECT_EQ(link_.registers[2].inventory().node_name(), "box-1");
  ASSERT_EQ(link_.stream->written.size(), 1u);
  EXPECT_EQ(link_.stream->written[0].seq(), 1u);
  ASSERT_EQ(link_.stream->written[0].ranks_size(), 1);
  EXPECT_EQ(link_.stream->written[0].ranks(0).job_id(), "j1");
}

}  // namespace
}  // namespace ringmaster::agent
