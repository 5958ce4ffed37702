#include "cli/job_format.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

TEST(JobFormat, AJobShortOfNodesSaysHowManyMoreItWaitsFor) {
  v1::JobStatus s;
  s.set_phase(v1::JOB_PHASE_RENDEZVOUS);
  v1::RendezvousStatus* r = s.mutable_rendezvous();
  r->add_joined_node_ids("n1");
  r->add_joined_node_ids("n2");
  r->set_min_nodes(3);
  r->set_max_nodes(3);
  r->set_missing_for_min(1);
  r->mutable_join_deadline()->set_seconds(1767225600);  // 2026-01-01T00:00:00Z
  EXPECT_EQ(WaitingForNodes(s), "waiting for 1 more node (2 of 3 Ready)");
  EXPECT_EQ(FormatProgressLine(s),
            "Rendezvous  nodes 2/3  waiting for 1 more node (2 of 3 Ready)  restarts 0/0");
  EXPECT_THAT(FormatJobDetails(s),
              HasSubstr("nodes:      waiting for 1 more node (2 of 3 Ready); fails at "
                        "2026-01-01T00:00:00Z (join timeout) unless they join\n"));
  r->set_missing_for_min(2);
  EXPECT_EQ(WaitingForNodes(s), "waiting for 2 more nodes (2 of 3 Ready)");
  // A coordinator that binds nodes only once the minimum can start: none joined, 2 free.
  r->clear_joined_node_ids();
  r->set_missing_for_min(3);
  r->set_free_nodes(2);
  EXPECT_EQ(WaitingForNodes(s), "waiting for 1 more node (2 of 3 Ready)");
  EXPECT_EQ(FormatProgressLine(s),
            "Rendezvous  nodes 0/3  waiting for 1 more node (2 of 3 Ready)  restarts 0/0");
  r->set_missing_for_min(0);
  EXPECT_EQ(WaitingForNodes(s), "");
  s.set_phase(v1::JOB_PHASE_RUNNING);
  r->set_missing_for_min(1);
  EXPECT_EQ(WaitingForNodes(s), "");
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

TEST(JobFormat, DetailsNameTheStallAndTheWorstStraggler) {
  v1::JobStatus s;
  s.set_phase(v1::JOB_PHASE_RUNNING);
  s.set_world_size(4);
  v1::CollectiveStall* stall = s.mutable_stall();
  stall->set_seq(1234);
  stall->set_op("AllReduceSum");
  stall->add_missing_ranks(3);
  for (uint32_t r : {2u, 0u, 1u}) stall->add_waiting_ranks(r);
  stall->mutable_waited()->set_seconds(12);
  stall->mutable_waited()->set_nanos(300'000'000);
  const double scores[] = {0.01, -0.02, 0.31, 0};
  for (uint32_t r = 0; r < 4; ++r) {
    v1::RankStraggler* g = s.add_stragglers();
    g->set_rank(r);
    g->set_seconds_per_step(scores[r]);
  }
  const std::string details = FormatJobDetails(s);
  EXPECT_THAT(details, HasSubstr("stalled:    rank(s) 3 have not entered collective #1234 "
                                 "(AllReduceSum); ranks 0,1,2 waiting 12.3s\n"));
  EXPECT_THAT(details, HasSubstr("straggler:  rank 2 (+0.31 s/step)\n"));
  EXPECT_THAT(FormatProgressLine(s), HasSubstr("stalled: rank(s) 3 not in collective #1234"));
  stall->clear_waiting_ranks();
  stall->add_waiting_ranks(0);
  EXPECT_THAT(FormatJobDetails(s), HasSubstr("(AllReduceSum); rank 0 waiting 12.3s\n"));

  // Healthy: no stall line, and stragglers below 0.05 s/step are noise.
  v1::JobStatus healthy;
  healthy.set_phase(v1::JOB_PHASE_RUNNING);
  for (uint32_t r = 0; r < 2; ++r) {
    v1::RankStraggler* g = healthy.add_stragglers();
    g->set_rank(r);
    g->set_seconds_per_step(0.04 * r);
  }
  EXPECT_THAT(FormatJobDetails(healthy), Not(HasSubstr("stalled")));
  EXPECT_THAT(FormatJobDetails(healthy), Not(HasSubstr("straggler")));
  EXPECT_THAT(FormatProgressLine(healthy), Not(HasSubstr("stalled")));
}

// Issue #20: names, ids and errors come from the network; a control character in one must not
// forge a line or move the cursor on the user's terminal.
TEST(JobFormat, NetworkTextIsPrintedWithItsControlCharactersEscaped) {
  v1::ListNodesResponse nodes;
  v1::NodeInfo* n = nodes.add_nodes();
  n->set_node_id("node-1");
  n->mutable_inventory()->set_node_name("evil\nnode-9 Ready");
  n->mutable_inventory()->set_rack("r\x1b[2J");
  const std::string table = FormatNodesTable(nodes);
  EXPECT_THAT(table, HasSubstr("evil\\nnode-9 Ready"));
  EXPECT_THAT(table, HasSubstr("r\\x1b[2J"));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2);  // header and one row
  v1::JobStatus s;
  s.set_job_id("job-1");
  s.set_name("n\rm");
  s.set_phase(v1::JOB_PHASE_FAILED);
  s.set_error("boom\nphase:      Succeeded");
  EXPECT_THAT(FormatProgressLine(s), HasSubstr("error: boom\\nphase:      Succeeded"));
  const std::string details = FormatJobDetails(s);
  EXPECT_THAT(details, HasSubstr("job-1 (n\\rm)"));
  EXPECT_THAT(details, Not(HasSubstr("\nphase:      Succeeded")));
}

}  // namespace
}  // namespace ringmaster::cli
