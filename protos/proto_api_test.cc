// The generated ringmaster.v1 code compiles, links and round-trips the messages the agent and
// coordinator exchange; enum zero values are UNSPECIFIED, as the compatibility rules demand.
#include <string>

#include "gtest/gtest.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace ringmaster::v1 {
namespace {

TEST(ProtoApiTest, StartRanksRoundTrips) {
  CoordinatorMessage msg;
  msg.set_command_id(17);
  StartRanks* start = msg.mutable_start_ranks();
  start->set_job_id("job-000001");
  start->set_generation(2);
  start->set_world_size(16);
  (*start->mutable_common_env())["WORLD_SIZE"] = "16";
  RankLaunch* rank = start->add_ranks();
  rank->set_global_rank(9);
  rank->set_local_rank(1);
  rank->set_gpu_index(1);
  (*rank->mutable_env())["RANK"] = "9";
  rank->set_micro_batch_weight(0.5);

  CoordinatorMessage back;
  ASSERT_TRUE(back.ParseFromString(msg.SerializeAsString()));
  ASSERT_EQ(back.command_case(), CoordinatorMessage::kStartRanks);
  EXPECT_EQ(back.start_ranks().generation(), 2);
  EXPECT_EQ(back.start_ranks().common_env().at("WORLD_SIZE"), "16");
  EXPECT_EQ(back.start_ranks().ranks(0).env().at("RANK"), "9");
  EXPECT_EQ(back.start_ranks().ranks(0).micro_batch_weight(), 0.5);
}

TEST(ProtoApiTest, ProgressReportRoundTrips) {
  AgentMessage msg;
  msg.set_node_id("node-1");
  msg.set_seq(3);
  RankProgress* p = msg.add_ranks();
  p->set_job_id("job-000001");
  p->set_state(RANK_PROCESS_STATE_EXITED);
  p->set_exit_code(2);
  p->set_failure_kind(FAILURE_KIND_DETERMINISTIC_STARTUP);
  p->set_last_error_line("data/train.tsv: No such file or directory");
  msg.add_acked_command_ids(17);
  AgentMessage back;
  ASSERT_TRUE(back.ParseFromString(msg.SerializeAsString()));
  EXPECT_EQ(back.ranks(0).failure_kind(), FAILURE_KIND_DETERMINISTIC_STARTUP);
  EXPECT_EQ(back.acked_command_ids(0), 17u);
}

TEST(ProtoApiTest, UnknownFieldsFromNewerPeersSurvive) {
  // A newer peer's field 99 must not break an older reader, and is kept when re-serialised.
  JobStatus status;
  status.set_job_id("job-000001");
  std::string wire = status.SerializeAsString();
  wire += std::string("\x98\x06\x01", 3);  // field 99, varint 1
  JobStatus old_reader;
  ASSERT_TRUE(old_reader.ParseFromString(wire));
  EXPECT_EQ(old_reader.job_id(), "job-000001");
  EXPECT_EQ(old_reader.SerializeAsString(), wire);
}

TEST(ProtoApiTest, EnumsStartUnspecified) {
  EXPECT_EQ(JobPhase_Name(JobPhase{}), "JOB_PHASE_UNSPECIFIED");
  EXPECT_EQ(FailureKind_Name(FailureKind{}), "FAILURE_KIND_UNSPECIFIED");
  EXPECT_EQ(NodeState_Name(NodeState{}), "NODE_STATE_UNSPECIFIED");
  EXPECT_EQ(RankProcessState_Name(RankProcessState{}), "RANK_PROCESS_STATE_UNSPECIFIED");
}

TEST(ProtoApiTest, ServicesHaveTheirMethods) {
  EXPECT_STREQ(Coordinator::service_full_name(), "ringmaster.v1.Coordinator");
  EXPECT_STREQ(AgentService::service_full_name(), "ringmaster.v1.AgentService");
  // Instantiable server bases: the servers (next step) derive from these.
  Coordinator::Service coordinator;
  AgentService::Service agent;
  SUCCEED();
}

}  // namespace
}  // namespace ringmaster::v1
