#include "cli/job_format.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;

TEST(JobFormat, ProgressLineWhileRunning) {
  v1::JobStatus s;
  s.set_phase(v1::JOB_PHASE_RUNNING);
  s.set_step(120);
  s.set_total_steps(1000);
  s.set_loss(0.43121);
  s.set_samples_per_second(38.24);
  s.mutable_eta()->set_seconds(83);
  s.set_world_size(4);
  s.set_restarts(1);
  s.set_max_restarts(3);
  EXPECT_EQ(FormatProgressLine(s),
            "Running  step 120/1000  loss 0.4312  38.2 samples/s  ETA 1m23s  world 4  "
            "restarts 1/3");
}

TEST(JobFormat, ProgressLineBeforeProgressAndOnFailure) {
  v1::JobStatus s;
  s.set_phase(v1::JOB_PHASE_RENDEZVOUS);
  s.mutable_rendezvous()->add_joined_node_ids("n1");
  s.mutable_rendezvous()->set_min_nodes(2);
  s.mutable_rendezvous()->set_max_nodes(4);
  s.set_max_restarts(3);
  EXPECT_EQ(FormatProgressLine(s), "Rendezvous  nodes 1/2..4  restarts 0/3");
  v1::JobStatus f;
  f.set_phase(v1::JOB_PHASE_FAILED);
  f.set_error("rank 1 exited with 3: data/train.tsv: not found");
  EXPECT_THAT(FormatProgressLine(f), HasSubstr("Failed"));
  EXPECT_THAT(FormatProgressLine(f), HasSubstr("error: rank 1 exited with 3"));
}

TEST(JobFormat, PhasesAndTables) {
  EXPECT_EQ(PhaseName(v1::JOB_PHASE_SUCCEEDED), "Succeeded");
  EXPECT_EQ(PhaseName(static_cast<v1::JobPhase>(99)), "Unknown");
  EXPECT_TRUE(IsTerminal(v1::JOB_PHASE_CANCELLED));
  EXPECT_FALSE(IsTerminal(v1::JOB_PHASE_RESTARTING));
  v1::ListNodesResponse nodes;
  v1::NodeInfo* n = nodes.add_nodes();
  n->set_node_id("node-1");
  n->set_state(v1::NODE_STATE_BUSY);
  n->set_job_id("job-9");
  n->mutable_inventory()->set_node_name("gpu-a");
  n->mutable_inventory()->add_addresses("10.0.0.2");
  v1::GpuInfo* g = n->mutable_inventory()->add_gpus();
  g->set_name("Tesla P40");
  g->set_compute_capability_major(6);
  g->set_compute_capability_minor(1);
  g->set_memory_bytes(uint64_t{24} << 30);
  const std::string table = FormatNodesTable(nodes);
  EXPECT_THAT(table, HasSubstr("NODE"));
  EXPECT_THAT(table, HasSubstr("gpu-a"));
  EXPECT_THAT(table, HasSubstr("Busy"));
  EXPECT_THAT(table, HasSubstr("Tesla P40 sm_61 24GiB / job-9"));
}

}  // namespace
}  // namespace ringmaster::cli
