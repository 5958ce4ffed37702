// ctest-labels: integration
// The real gRPC server in-process on 127.0.0.1:0: a fake agent registers and opens its Heartbeat
// stream over real gRPC, a client submits a job through the Coordinator stub, the StartRanks
// that arrives carries the torchrun environment, and once the rank reports exit 0 WatchJob ends
// with Succeeded.
#include "coordinator/service/coordinator_server.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/cluster/api_version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::coordinator {
namespace {

using security::TokenPolicy;
using ::testing::HasSubstr;

constexpr char kJob[] = R"(name: tiny
model:
  init_from: models/bert-tiny
data:
  train: data/train.tsv
output:
  dir: runs/tiny
distributed:
  nodes: 1
)";

// Every blocking call in this test carries a deadline, so a bug fails the test instead of
// hanging it.
void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

class CoordinatorServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    ClusterOptions options;
    options.job.coordinator_address = "127.0.0.1:7070";
    absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Create(options, *db_, clock_);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
        CoordinatorServer::Start("127.0.0.1:0", *cluster_, absl::ZeroDuration(),
                                 {grpc::InsecureServerCredentials(), TokenPolicy()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    coordinator_ = v1::Coordinator::NewStub(channel_);
    agent_ = v1::AgentService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  FakeClock clock_;
  std::unique_ptr<JobDb> db_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
};

TEST_F(CoordinatorServerTest, FakeAgentRunsAJobToSuccess) {
  // The agent registers and opens its stream.
  v1::RegisterRequest reg;
  reg.mutable_agent_version()->set_major(kApiMajor);
  reg.mutable_inventory()->set_node_name("node-a");
  reg.mutable_inventory()->set_hostname("host-a");
  reg.mutable_inventory()->add_addresses("127.0.0.1");
  reg.mutable_inventory()->set_cpu_cores(4);
  v1::RegisterResponse registered;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    grpc::Status st = agent_->Register(&ctx, reg, &registered);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string node_id = registered.node_id();
  EXPECT_EQ(registered.coordinator_version().major(), kApiMajor);
  EXPECT_GT(registered.heartbeat_interval().seconds() + registered.heartbeat_interval().nanos(), 0);

  grpc::ClientContext hb_ctx;
  SetDeadline(&hb_ctx);
  auto stream = agent_->Heartbeat(&hb_ctx);
  uint64_t seq = 0;
  auto send = [&](std::vector<v1::RankProgress> ranks, std::vector<uint64_t> acks) {
    v1::AgentMessage m;
    m.set_node_id(node_id);
    m.set_seq(++seq);
    if (seq == 1) m.set_node_secret(registered.node_secret());
    for (auto& r : ranks) *m.add_ranks() = std::move(r);
    for (uint64_t a : acks) m.add_acked_command_ids(a);
    return stream->Write(m);
  };
  ASSERT_TRUE(send({}, {}));

  // A client submits; the registered node joins at once (nodes: 1).
  v1::SubmitJobRequest submit;
  submit.mutable_client_version()->set_major(kApiMajor);
  submit.set_job_yaml(kJob);
  submit.set_base_dir("/shared/jobs");
  submit.set_source("tiny.yaml");
  v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    grpc::Status st = coordinator_->SubmitJob(&ctx, submit, &submitted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string job_id = submitted.job_id();
  EXPECT_EQ(submitted.status().name(), "tiny");

  // StartRanks reaches the agent with the rank's environment.
  v1::CoordinatorMessage command;
  ASSERT_TRUE(stream->Read(&command));
  ASSERT_TRUE(command.has_start_ranks());
  EXPECT_NE(command.command_id(), 0u);
  const v1::StartRanks& start = command.start_ranks();
  EXPECT_EQ(start.job_id(), job_id);
  EXPECT_EQ(start.generation(), 0);
  EXPECT_EQ(start.world_size(), 1u);
  EXPECT_EQ(start.base_dir(), "/shared/jobs");
  EXPECT_EQ(start.job_yaml(), kJob);
  EXPECT_EQ(start.common_env().at("WORLD_SIZE"), "1");
  EXPECT_EQ(start.common_env().at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(start.common_env().at("RINGMASTER_JOB_ID"), job_id);
  EXPECT_EQ(start.common_env().at("RINGMASTER_GENERATION"), "0");
  EXPECT_EQ(start.common_env().at("RINGMASTER_COORDINATOR"), "127.0.0.1:7070");
  ASSERT_EQ(start.ranks_size(), 1);
  EXPECT_EQ(start.ranks(0).env().at("RANK"), "0");
  EXPECT_EQ(start.ranks(0).env().at("LOCAL_RANK"), "0");
  EXPECT_EQ(start.ranks(0).gpu_index(), -1);
  EXPECT_EQ(start.ranks(0).env().at("RINGMASTER_PRECISION"), "fp32");

  // A watcher sees Running now and, after the rank's exit 0, Succeeded; then the stream ends.
  grpc::ClientContext watch_ctx;
  SetDeadline(&watch_ctx);
  v1::WatchJobRequest watch;
  watch.set_job_id(job_id);
  watch.set_min_interval_ms(1);
  auto watcher = coordinator_->WatchJob(&watch_ctx, watch);
  v1::JobStatus seen;
  ASSERT_TRUE(watcher->Read(&seen));
  EXPECT_EQ(seen.phase(), v1::JOB_PHASE_RUNNING);

  v1::RankProgress progress;
  progress.set_job_id(job_id);
  progress.set_generation(0);
  progress.set_global_rank(0);
  progress.set_state(v1::RANK_PROCESS_STATE_RUNNING);
  progress.set_step(7);
  progress.set_total_steps(10);
  progress.set_loss(0.25);
  ASSERT_TRUE(send({progress}, {command.command_id()}));
  v1::RankProgress exited = progress;
  exited.set_state(v1::RANK_PROCESS_STATE_EXITED);
  exited.set_step(10);
  exited.set_exit_code(0);
  ASSERT_TRUE(send({exited}, {}));

  std::vector<v1::JobPhase> phases;
  while (watcher->Read(&seen)) phases.push_back(seen.phase());
  grpc::Status watch_end = watcher->Finish();
  EXPECT_TRUE(watch_end.ok()) << watch_end.error_message();
  ASSERT_FALSE(phases.empty());
  EXPECT_EQ(phases.back(), v1::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(seen.step(), 10);

  // GetJob agrees; unknown ids and bad specs are the right gRPC codes.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    v1::JobStatus status;
    ASSERT_TRUE(coordinator_->GetJob(&ctx, get, &status).ok());
    EXPECT_EQ(status.phase(), v1::JOB_PHASE_SUCCEEDED);
    grpc::ClientContext ctx2;
    SetDeadline(&ctx2);
    get.set_job_id("job-nope");
    EXPECT_EQ(coordinator_->GetJob(&ctx2, get, &status).error_code(), grpc::StatusCode::NOT_FOUND);
    grpc::ClientContext ctx3;
    SetDeadline(&ctx3);
    submit.set_job_yaml(std::string(kJob) + "bogus: 1\n");
    grpc::Status bad = coordinator_->SubmitJob(&ctx3, submit, &submitted);
    EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(bad.error_message(), HasSubstr("tiny.yaml"));
  }

  stream->WritesDone();
  grpc::Status hb_end = stream->Finish();
  EXPECT_TRUE(hb_end.ok()) << hb_end.error_message();
}

TEST_F(CoordinatorServerTest, HeartbeatFromAnUnknownNodeIsNotFound) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = agent_->Heartbeat(&ctx);
  v1::AgentMessage m;
  m.set_node_id("node-unknown");
  ASSERT_TRUE(stream->Write(m));
  stream->WritesDone();
  v1::CoordinatorMessage ignored;
  EXPECT_FALSE(stream->Read(&ignored));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(CoordinatorServerTest, ShutdownEndsOpenStreams) {
  v1::RegisterRequest reg;
  reg.mutable_agent_version()->set_major(kApiMajor);
  reg.mutable_inventory()->set_node_name("node-b");
  reg.mutable_inventory()->add_addresses("127.0.0.1");
  v1::RegisterResponse registered;
  grpc::ClientContext rctx;
  SetDeadline(&rctx);
  ASSERT_TRUE(agent_->Register(&rctx, reg, &registered).ok());
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = agent_->Heartbeat(&ctx);
  v1::AgentMessage m;
  m.set_node_id(registered.node_id());
  m.set_node_secret(registered.node_secret());
  ASSERT_TRUE(stream->Write(m));
  // A message round trip proves the server holds the stream before it shuts down.
  v1::SubmitJobRequest submit;
  submit.mutable_client_version()->set_major(kApiMajor);
  submit.set_job_yaml(kJob);
  submit.set_base_dir("/x");
  v1::SubmitJobResponse submitted;
  grpc::ClientContext sctx;
  SetDeadline(&sctx);
  ASSERT_TRUE(coordinator_->SubmitJob(&sctx, submit, &submitted).ok());
  v1::CoordinatorMessage command;
  ASSERT_TRUE(stream->Read(&command));
  server_->Shutdown();  // must return although the agent never closes its stream
  EXPECT_FALSE(stream->Read(&command));
  EXPECT_FALSE(stream->Finish().ok());
}

// With tokens, each call needs its own: the join token registers, the submit token submits and
// not the other way round; refusals say which token, never its value.
TEST(CoordinatorServerTokensTest, CallsNeedTheirToken) {
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock);
  ASSERT_TRUE(db.ok()) << db.status();
  ClusterOptions options;
  options.job.coordinator_address = "127.0.0.1:7070";
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Create(options, **db, clock);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  security::Refusals refusals;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(
      "127.0.0.1:0", **cluster, absl::ZeroDuration(),
      {grpc::InsecureServerCredentials(), TokenPolicy("join-secret", "submit-secret"), &refusals});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto agent = v1::AgentService::NewStub(channel);
  auto coordinator = v1::Coordinator::NewStub(channel);

  v1::RegisterRequest reg;
  reg.mutable_agent_version()->set_major(kApiMajor);
  reg.mutable_inventory()->set_node_name("node-t");
  reg.mutable_inventory()->add_addresses("127.0.0.1");
  v1::RegisterResponse registered;
  for (const std::string token : {"", "submit-secret", "join-secre"}) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    security::AttachToken(&ctx, token);
    grpc::Status s = agent->Register(&ctx, reg, &registered);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << token;
    EXPECT_THAT(s.error_message(), HasSubstr("join token"));
    EXPECT_THAT(s.error_message(), ::testing::Not(HasSubstr("secret")));
  }
  grpc::ClientContext rctx;
  SetDeadline(&rctx);
  security::AttachToken(&rctx, "join-secret");
  EXPECT_TRUE(agent->Register(&rctx, reg, &registered).ok());

  v1::SubmitJobRequest submit;
  submit.mutable_client_version()->set_major(kApiMajor);
  submit.set_job_yaml(kJob);
  submit.set_base_dir("/x");
  v1::SubmitJobResponse submitted;
  grpc::ClientContext bad;
  SetDeadline(&bad);
  security::AttachToken(&bad, "join-secret");
  grpc::Status s = coordinator->SubmitJob(&bad, submit, &submitted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("submit token"));
  grpc::ClientContext good;
  SetDeadline(&good);
  security::AttachToken(&good, "submit-secret");
  EXPECT_TRUE(coordinator->SubmitJob(&good, submit, &submitted).ok());

  // Reads take either token, and no token is refused.
  v1::ListNodesResponse nodes;
  grpc::ClientContext read_join;
  SetDeadline(&read_join);
  security::AttachToken(&read_join, "join-secret");
  EXPECT_TRUE(coordinator->ListNodes(&read_join, v1::ListNodesRequest(), &nodes).ok());
  grpc::ClientContext read_none;
  SetDeadline(&read_none);
  EXPECT_EQ(coordinator->ListNodes(&read_none, v1::ListNodesRequest(), &nodes).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Every refusal is counted by reason: no token on a Register and a ListNodes; a wrong one on
  // two Registers and a SubmitJob. The accepted calls count nothing.
  EXPECT_EQ(refusals.count(security::Refusal::kMissingToken), 2u);
  EXPECT_EQ(refusals.count(security::Refusal::kWrongToken), 3u);
  EXPECT_EQ(refusals.count(security::Refusal::kRegistration), 0u);
  (*server)->Shutdown();
}

}  // namespace
}  // namespace ringmaster::coordinator
