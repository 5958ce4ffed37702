// Cluster: scheduling free nodes into jobs, lost heartbeats (FakeClock + Tick), stale ranks
// being stopped, submission errors and idempotency, a coordinator restart that reloads its jobs
// and nodes from the database file, the collective traces' stall and straggler figures in the
// job's status, and the per-job watch signal. Registration and agent streams:
// cluster_agents_test.cc.
#include "coordinator/cluster/cluster_test_fixture.h"

namespace ringmaster::coordinator {
namespace {

TEST_F(ClusterTest, FreeNodesJoinTheJobAndRunItToSuccess) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string b = Connect("b", "10.0.0.2");
  const std::string job = Submit("2");
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  std::vector<v1::CoordinatorMessage> to_a = Drain(*outboxes_[a]);
  ASSERT_EQ(to_a.size(), 1u);
  ASSERT_TRUE(to_a[0].has_start_ranks());
  EXPECT_NE(to_a[0].command_id(), 0u);
  EXPECT_EQ(to_a[0].start_ranks().common_env().at("MASTER_ADDR"), "10.0.0.1");
  ASSERT_EQ(Drain(*outboxes_[b]).size(), 1u);

  v1::ListNodesResponse nodes = cluster_->ListNodes();
  ASSERT_EQ(nodes.nodes_size(), 2);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_BUSY);
  EXPECT_EQ(nodes.nodes(0).job_id(), job);

  Heartbeat(a, {Rank(job, 0, 0, v1::RANK_PROCESS_STATE_EXITED)});
  Heartbeat(b, {Rank(job, 0, 1, v1::RANK_PROCESS_STATE_EXITED)});
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_SUCCEEDED);
  EXPECT_EQ(cluster_->ListNodes().nodes(0).state(), v1::NODE_STATE_READY);
}

TEST_F(ClusterTest, OneJobPerNodeOldestFirst) {
  const std::string first = Submit("1");
  const std::string second = Submit("1");
  Connect("a", "10.0.0.1");
  EXPECT_EQ(Job(first).phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(Job(second).phase(), v1::JOB_PHASE_RENDEZVOUS);
  ASSERT_TRUE(cluster_
                  ->CancelJob([&] {
                    v1::CancelJobRequest c;
                    c.set_job_id(first);
                    return c;
                  }())
                  .ok());
  EXPECT_EQ(Job(first).phase(), v1::JOB_PHASE_CANCELLED);
  EXPECT_EQ(Job(second).phase(), v1::JOB_PHASE_RUNNING);  // the node moved on
}

TEST_F(ClusterTest, LostHeartbeatRestartsOnTheRemainingNode) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string b = Connect("b", "10.0.0.2");
  const std::string job = Submit("1:2");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);  // MAX joined
  ASSERT_EQ(Job(job).world_size(), 2u);
  Drain(*outboxes_[a]);
  Drain(*outboxes_[b]);

  clock_.Advance(absl::Seconds(6));
  Heartbeat(a);  // only a keeps talking
  cluster_->Tick();
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  clock_.Advance(absl::Seconds(4));  // b silent for 10 s
  cluster_->Tick();
  v1::JobStatus s = Job(job);
  EXPECT_EQ(s.generation(), 1);
  EXPECT_EQ(s.restarts(), 1u);
  EXPECT_EQ(s.last_failure(), v1::FAILURE_KIND_NODE_LOST);
  EXPECT_EQ(s.phase(), v1::JOB_PHASE_RENDEZVOUS);
  EXPECT_THAT(s.rendezvous().joined_node_ids(), ElementsAre(a));  // a rejoined at once
  EXPECT_EQ(cluster_->ListNodes().nodes(1).state(), v1::NODE_STATE_LOST);
  std::vector<v1::CoordinatorMessage> to_a = Drain(*outboxes_[a]);
  ASSERT_EQ(to_a.size(), 1u);
  EXPECT_EQ(to_a[0].stop_ranks().generation(), 0);

  clock_.Advance(absl::Seconds(5));
  Heartbeat(a);
  cluster_->Tick();
  s = Job(job);
  EXPECT_EQ(s.phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(s.world_size(), 1u);
  to_a = Drain(*outboxes_[a]);
  ASSERT_EQ(to_a.size(), 1u);
  EXPECT_EQ(to_a[0].start_ranks().generation(), 1);
  EXPECT_EQ(to_a[0].start_ranks().world_size(), 1u);

  // b comes back still running its rank of generation 0: it is told to stop, once.
  Heartbeat(b, {Rank(job, 0, 1, v1::RANK_PROCESS_STATE_RUNNING)});
  Heartbeat(b, {Rank(job, 0, 1, v1::RANK_PROCESS_STATE_RUNNING)});
  std::vector<v1::CoordinatorMessage> to_b = Drain(*outboxes_[b]);
  ASSERT_EQ(to_b.size(), 1u);
  EXPECT_EQ(to_b[0].stop_ranks().generation(), 0);
  EXPECT_EQ(to_b[0].stop_ranks().job_id(), job);
}

TEST_F(ClusterTest, InvalidSpecIsRefusedAndNothingIsStored) {
  v1::SubmitJobRequest bad = Submission("2");
  bad.set_job_yaml(bad.job_yaml() + "  bogus: 1\n");
  absl::StatusOr<v1::SubmitJobResponse> r = cluster_->SubmitJob(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("sst2.yaml"));
  EXPECT_THAT(r.status().message(), HasSubstr("restart.bogus"));
  EXPECT_THAT(cluster_->ListJobs({})->jobs(), IsEmpty());
  EXPECT_THAT(*db_->ListJobs(), IsEmpty());
}

// Issue #31: a spec error quotes the job file; control characters in it come back escaped.
TEST_F(ClusterTest, SpecErrorsAreEchoedWithTheirControlCharactersEscaped) {
  v1::SubmitJobRequest r = Submission("1");
  r.set_job_yaml(r.job_yaml() + "\"bogus\\e[2J\\r\": 1\n");
  absl::StatusOr<v1::SubmitJobResponse> resp = cluster_->SubmitJob(r);
  ASSERT_FALSE(resp.ok());
  const std::string message(resp.status().message());
  EXPECT_THAT(message, HasSubstr("unknown key 'bogus\\x1b[2J\\r'"));
  EXPECT_EQ(message.find_first_of("\x1b\r"), std::string::npos);
}

TEST_F(ClusterTest, SubmitWithTheSameRequestIdReturnsTheFirstJob) {
  absl::StatusOr<v1::SubmitJobResponse> first = cluster_->SubmitJob(Submission("1", "req-1"));
  absl::StatusOr<v1::SubmitJobResponse> again = cluster_->SubmitJob(Submission("1", "req-1"));
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->job_id(), again->job_id());
  EXPECT_EQ(cluster_->ListJobs({})->jobs_size(), 1);
}

TEST_F(ClusterTest, ACoordinatorRestartReloadsJobsAndNodes) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string running = Submit("1");
  const std::string waiting = Submit("2");
  ASSERT_EQ(Job(running).phase(), v1::JOB_PHASE_RUNNING);
  outboxes_.clear();

  Open();  // a new coordinator process on the same file
  v1::JobStatus r = Job(running);
  EXPECT_EQ(r.phase(), v1::JOB_PHASE_RENDEZVOUS);
  EXPECT_EQ(r.generation(), 1);
  EXPECT_EQ(r.restarts(), 0u);
  EXPECT_EQ(Job(waiting).phase(), v1::JOB_PHASE_RENDEZVOUS);
  v1::ListNodesResponse nodes = cluster_->ListNodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).node_id(), a);
  EXPECT_EQ(nodes.nodes(0).state(), v1::NODE_STATE_LOST);  // until its agent talks again

  // The agent's stream comes back, still running generation 0 of the job.
  // It needs the secret of its registration before the restart: the database kept its digest.
  EXPECT_EQ(cluster_->AttachStream(a, "").status().code(), absl::StatusCode::kPermissionDenied);
  auto attached = cluster_->AttachStream(a, secrets_[a]);
  ASSERT_TRUE(attached.ok()) << attached.status();
  Heartbeat(a, {Rank(running, 0, 0, v1::RANK_PROCESS_STATE_RUNNING)});
  std::vector<v1::CoordinatorMessage> to_a = Drain(*attached->first);
  ASSERT_EQ(to_a.size(), 2u);
  EXPECT_EQ(to_a[0].stop_ranks().generation(), 0);
  EXPECT_EQ(to_a[1].start_ranks().generation(), 1);
  EXPECT_EQ(Job(running).phase(), v1::JOB_PHASE_RUNNING);

  // A node registered after the restart gets a fresh id.
  EXPECT_NE(Connect("b", "10.0.0.2"), a);

  // Issue #31: after a restart a known name needs its secret too (a polling Register won it
  // before its agent came back); the agent with the secret is accepted at once.
  cluster_->DetachStream(a, attached->second);
  Open();
  absl::Status early = cluster_->Register(Registration("a", "10.0.0.1", a)).status();
  EXPECT_EQ(early.code(), absl::StatusCode::kPermissionDenied) << early;
  absl::StatusOr<v1::RegisterResponse> back =
      cluster_->Register(Registration("a", "10.0.0.1", a, secrets_[a]));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->node_id(), a);
}

TEST_F(ClusterTest, AStallNamesTheRanksMissingFromTheCollectiveAndIsLoggedOnce) {
  options_.job.stall_after = absl::Seconds(10);
  options_.lost_after = absl::Seconds(60);  // the agents stay quiet while the ranks wait
  Open();
  const std::vector<std::string> nodes = {Connect("a", "10.0.0.1"), Connect("b", "10.0.0.2"),
                                          Connect("c", "10.0.0.3")};
  const std::string job = Submit("3");
  ASSERT_EQ(Job(job).world_size(), 3u);
  // Ranks 0 and 1 enter collective #12; rank 2 is still after #11.
  const absl::Time entered = clock_.Now();
  Heartbeat(nodes[0], {Traced(job, 0, 12, true, entered)});
  Heartbeat(nodes[1], {Traced(job, 1, 12, true, entered + absl::Seconds(1))});
  Heartbeat(nodes[2], {Traced(job, 2, 11, false, entered - absl::Seconds(1))});
  clock_.Advance(absl::Seconds(9));
  cluster_->Tick();
  EXPECT_FALSE(Job(job).has_stall());

  clock_.Advance(absl::Seconds(3));
  testing::internal::CaptureStderr();
  cluster_->Tick();
  cluster_->Tick();
  const std::string log = testing::internal::GetCapturedStderr();
  const v1::JobStatus s = Job(job);
  ASSERT_TRUE(s.has_stall());
  EXPECT_EQ(s.stall().seq(), 12u);
  EXPECT_EQ(s.stall().op(), "AllReduceSum");
  EXPECT_THAT(s.stall().missing_ranks(), ElementsAre(2));
  EXPECT_THAT(s.stall().waiting_ranks(), ElementsAre(0, 1));
  EXPECT_EQ(DurationFromProto(s.stall().waited()), absl::Seconds(12));
  EXPECT_THAT(log, HasSubstr("WARNING"));
  EXPECT_THAT(log, HasSubstr("rank(s) 2 have not entered collective #12 (AllReduceSum); "
                             "rank(s) 0,1 waited 12s"));
  EXPECT_EQ(log.find("collective #12"), log.rfind("collective #12")) << "logged once: " << log;
  // ListJobs carries it too.
  v1::ListJobsResponse list = *cluster_->ListJobs(v1::ListJobsRequest());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_TRUE(list.jobs(0).has_stall());

  // Rank 2 arrives: the collective completes, no stall.
  Heartbeat(nodes[2], {Traced(job, 2, 12, true, clock_.Now())});
  EXPECT_FALSE(Job(job).has_stall());
}

TEST_F(ClusterTest, StragglerScoresOnceEveryRankHasReportedTimings) {
  const std::vector<std::string> nodes = {Connect("a", "10.0.0.1"), Connect("b", "10.0.0.2"),
                                          Connect("c", "10.0.0.3")};
  const std::string job = Submit("3");
  // One step a second; rank 1 computes 0.3 s/step longer, so the others wait for it inside
  // the all-reduce: 0.4 s/step inside collectives against its 0.1.
  const double comm_per_step[] = {0.4, 0.1, 0.4};
  for (int t = 2; t <= 20; t += 2) {
    clock_.Advance(absl::Seconds(2));
    for (int r = 0; r < 3; ++r) {
      // Rank 2 reports no timings until late: no scores before.
      if (r == 2 && t < 12) continue;
      Heartbeat(nodes[static_cast<size_t>(r)], {Traced(job, r, static_cast<uint64_t>(t), false,
                                                       clock_.Now(), comm_per_step[r] * t, t)});
    }
    if (t == 10) {
      EXPECT_EQ(Job(job).stragglers_size(), 0);
    }
  }
  const v1::JobStatus s = Job(job);
  ASSERT_EQ(s.stragglers_size(), 3);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(s.stragglers(r).rank(), static_cast<uint32_t>(r));
  EXPECT_NEAR(s.stragglers(0).seconds_per_step(), 0, 1e-9);
  EXPECT_NEAR(s.stragglers(1).seconds_per_step(), 0.3, 1e-9);
  EXPECT_NEAR(s.stragglers(2).seconds_per_step(), 0, 1e-9);
  EXPECT_FALSE(s.has_stall());
  // A new generation starts over.
  Heartbeat(nodes[1], {Rank(job, 0, 1, v1::RANK_PROCESS_STATE_EXITED, 1)});
  EXPECT_EQ(Job(job).stragglers_size(), 0);
}

// Issue #20, item 3: a lost node is forgotten after forget_lost_after (registry, database, the
// snapshot /metrics is built from); a node some job holds, or a live one, is kept.
TEST_F(ClusterTest, AWatchedJobSignalsOnlyItsOwnChanges) {
  // Issue #31: every WatchJob woke at every event of the cluster (any job, any heartbeat) and
  // every 250 ms besides. A job's signal now changes only when its own status did.
  const std::string a = Connect("a", "10.0.0.1");
  const std::string job = Submit("1");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  Drain(*outboxes_[a]);
  absl::StatusOr<std::shared_ptr<JobWatch>> watch = cluster_->Watch(job);
  ASSERT_TRUE(watch.ok()) << watch.status();
  const JobWatch::Snapshot before = (*watch)->Current();
  EXPECT_EQ(before.status.phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(cluster_->Watch("job-nope").status().code(), absl::StatusCode::kNotFound);

  // Unrelated events: heartbeats of the job's node without news, another node, another job
  // submitted and cancelled, ticks.
  for (int i = 0; i < 20; ++i) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat(a);
    cluster_->Tick();
  }
  const std::string b = Connect("b", "10.0.0.2");
  const std::string other = Submit("2");
  Heartbeat(b);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(other);
  ASSERT_TRUE(cluster_->CancelJob(cancel).ok());
  EXPECT_EQ((*watch)->Current().version, before.version) << "woken by another job's events";
  // A wait that nothing ends returns at its timeout with the same version, as no wakeup.
  EXPECT_EQ((*watch)->WaitForChange(before.version, absl::ZeroDuration()).version, before.version);
  EXPECT_EQ((*watch)->wakeups(), 0u);

  // Its own change wakes a waiter that would otherwise wait forever.
  JobWatch::Snapshot woken;
  std::thread waiter(
      [&] { woken = (*watch)->WaitForChange(before.version, absl::InfiniteDuration()); });
  v1::RankProgress progress = Rank(job, 0, 0, v1::RANK_PROCESS_STATE_RUNNING);
  progress.set_step(3);
  progress.set_total_steps(10);
  Heartbeat(a, {progress});
  waiter.join();
  EXPECT_EQ(woken.version, before.version + 1);
  EXPECT_EQ(woken.status.step(), 3);
  EXPECT_EQ((*watch)->wakeups(), 1u);
  // The same report again changes nothing.
  Heartbeat(a, {progress});
  EXPECT_EQ((*watch)->Current().version, before.version + 1);

  // A second watcher shares the signal; shutting down closes it.
  absl::StatusOr<std::shared_ptr<JobWatch>> again = cluster_->Watch(job);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), watch->get());
  cluster_->Shutdown();
  EXPECT_TRUE((*watch)->WaitForChange(before.version + 1, absl::InfiniteDuration()).closed);
}

}  // namespace
}  // namespace ringmaster::coordinator
