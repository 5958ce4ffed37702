// Cluster, the agents' side (cluster_agents.cc): registration and its secrets, names, caps and
// versions, streams that close, break or reconnect, forgetting lost nodes, log requests answered
// by the node asked, and the node list's pages.
#include "coordinator/cluster/cluster_test_fixture.h"

namespace ringmaster::coordinator {
namespace {

TEST_F(ClusterTest, NodeWithAClosedStreamIsNotOfferedUntilItReconnects) {
  // An agent killed with SIGKILL: its stream closes at once, long before lost_after says so. A
  // job restarting meanwhile must not plan ranks onto it.
  const std::string a = Connect("a", "10.0.0.1");
  const std::string b = Connect("b", "10.0.0.2");
  cluster_->DetachStream(b, epochs_[b]);
  const std::string job = Submit("1:2");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RENDEZVOUS);
  EXPECT_THAT(Job(job).rendezvous().joined_node_ids(), ElementsAre(a));
  // b comes back within the window: it joins, which completes the rendezvous (MAX 2).
  ASSERT_TRUE(cluster_->AttachStream(b, secrets_[b]).ok());
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(Job(job).world_size(), 2);
}

TEST_F(ClusterTest, VersionsAreChecked) {
  v1::SubmitJobRequest old = Submission("1");
  old.mutable_client_version()->set_major(2);
  EXPECT_EQ(cluster_->SubmitJob(old).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::RegisterRequest unversioned = Registration("a", "10.0.0.1");
  unversioned.clear_agent_version();
  absl::Status st = cluster_->Register(unversioned).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("agent speaks API 0.0"));
}

// Issue #20: holding the join token lets a caller register a node of its own, not speak for
// another one.
TEST_F(ClusterTest, AStreamNeedsItsRegistrationsSecret) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string first = secrets_[a];
  EXPECT_EQ(cluster_->AttachStream(a, "").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(cluster_->AttachStream(a, std::string(64, '0')).status().code(),
            absl::StatusCode::kPermissionDenied);
  // The secret itself, while the agent's stream is open: a second stream is refused.
  absl::Status twice = cluster_->AttachStream(a, first).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(twice.message(), HasSubstr("already has an open heartbeat stream"));
  // Re-registering the connected node: only with its secret, even from its own address.
  absl::Status taken = cluster_->Register(Registration("a", "10.0.0.1")).status();
  EXPECT_EQ(taken.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(taken.message(), HasSubstr("has a connected agent"));
  EXPECT_EQ(
      cluster_->Register(Registration("a", "10.0.0.1", a, std::string(64, 'f'))).status().code(),
      absl::StatusCode::kPermissionDenied);
  // The agent itself reconnects (its old stream not yet seen broken): a new secret, which
  // replaces the old one; the new stream takes the node over.
  absl::StatusOr<v1::RegisterResponse> again =
      cluster_->Register(Registration("a", "10.0.0.1", a, first));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->node_secret(), first);
  EXPECT_EQ(cluster_->AttachStream(a, first).status().code(), absl::StatusCode::kPermissionDenied);
  auto second = cluster_->AttachStream(a, again->node_secret());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(cluster_->AttachStream(a, again->node_secret()).status().code(),
            absl::StatusCode::kAlreadyExists);
  // Once its stream closed (the agent away), the name still needs the node's secret (issue #31:
  // a join-token holder took it here): refused without, and with the superseded one; a
  // restarted agent carries the latest (it keeps it in its work dir).
  cluster_->DetachStream(a, second->second);
  absl::Status away = cluster_->Register(Registration("a", "10.0.0.1", a)).status();
  EXPECT_EQ(away.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(away.message(), HasSubstr("registering it again without node secret is refused"));
  EXPECT_THAT(away.message(), HasSubstr("ringmaster nodes forget a"));
  EXPECT_EQ(cluster_->Register(Registration("a", "10.0.0.1", a, first)).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::RegisterResponse> restarted =
      cluster_->Register(Registration("a", "10.0.0.1", "", again->node_secret()));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->node_id(), a);
}

// Issue #31: an operator frees the name of a node whose secret is lost; the join token cannot.
TEST_F(ClusterTest, ForgetNodeFreesTheNameOfANodeWhoseAgentIsAway) {
  const std::string a = Connect("a", "10.0.0.1");
  absl::Status connected = cluster_->ForgetNode("a");
  EXPECT_EQ(connected.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(connected.message(), HasSubstr("has a connected agent; stop that agent first"));
  EXPECT_EQ(cluster_->ForgetNode("nope").code(), absl::StatusCode::kNotFound);
  const std::string job = Submit("1");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  cluster_->DetachStream(a, epochs_[a]);
  absl::Status held = cluster_->ForgetNode("a");
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(held.message(), HasSubstr("is held by job " + job));
  ASSERT_TRUE(cluster_
                  ->CancelJob([&] {
                    v1::CancelJobRequest r;
                    r.set_job_id(job);
                    return r;
                  }())
                  .ok());
  EXPECT_EQ(cluster_->Register(Registration("a", "10.0.0.1", a)).status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(cluster_->ForgetNode("a").ok());
  EXPECT_EQ(cluster_->ListNodes().nodes_size(), 0);
  // Gone from the database too: a restart does not bring it back.
  Open();
  EXPECT_EQ(cluster_->ListNodes().nodes_size(), 0);
  // Any agent may register the name now, without a secret.
  absl::StatusOr<v1::RegisterResponse> taken = cluster_->Register(Registration("a", "10.0.0.9"));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(cluster_->ListNodes().nodes(0).inventory().addresses(0), "10.0.0.9");
}

TEST_F(ClusterTest, NodeNamesAreCheckedAtRegistration) {
  for (const std::string bad : {std::string("a\nb"), std::string("-a"), std::string("a b"),
                                std::string("a\x1b[2Jb"), std::string(129, 'n')}) {
    absl::Status st = cluster_->Register(Registration(bad, "10.0.0.1")).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr("must be 1-128 letters, digits"));
    EXPECT_THAT(st.message(), ::testing::Not(HasSubstr(bad)));
  }
  EXPECT_TRUE(cluster_->Register(Registration(std::string(128, 'n'), "10.0.0.1")).ok());
  EXPECT_TRUE(cluster_->Register(Registration("gpu-01.rack_2", "10.0.0.2")).ok());
  EXPECT_TRUE(cluster_->ListNodes().nodes_size() == 2);
}

// Issue #20, item 5: free-text request fields are capped and hold no control characters.
TEST_F(ClusterTest, RequestTextFieldsAreCapped) {
  v1::SubmitJobRequest big = Submission("1", std::string(2 << 20, 'r'));
  absl::Status st = cluster_->SubmitJob(big).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("submit: request_id is 2097152 bytes; at most 128"));
  v1::SubmitJobRequest path = Submission("1");
  path.set_base_dir(std::string("/shared/a\0/../b", 16));
  st = cluster_->SubmitJob(path).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("submit: base_dir holds a control character (byte 0x00)"));
  path.set_base_dir(std::string(5000, 'd'));
  EXPECT_EQ(cluster_->SubmitJob(path).status().code(), absl::StatusCode::kInvalidArgument);
  v1::RegisterRequest reg = Registration("a", "10.0.0.1");
  reg.mutable_inventory()->set_rack("r\n1");
  EXPECT_EQ(cluster_->Register(reg).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(cluster_->ListJobs(v1::ListJobsRequest())->jobs().empty());
  EXPECT_TRUE(cluster_->SubmitJob(Submission("1", std::string(128, 'r'))).ok());
}

TEST_F(ClusterTest, ANameHeldByALiveAgentElsewhereIsRefused) {
  const std::string a = Connect("a", "10.0.0.1");
  EXPECT_EQ(cluster_->Register(Registration("a", "10.0.0.9")).status().code(),
            absl::StatusCode::kAlreadyExists);
  // The same agent registering again (reconnecting) keeps its id.
  absl::StatusOr<v1::RegisterResponse> again =
      cluster_->Register(Registration("a", "10.0.0.1", a, secrets_[a]));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->node_id(), a);
  EXPECT_EQ(again->lost_after().seconds(), 10);
  // Once it is lost, the name moves only with the node's secret (issue #31): an agent that
  // carries it, from a new address.
  clock_.Advance(absl::Seconds(10));
  cluster_->Tick();
  EXPECT_EQ(cluster_->Register(Registration("a", "10.0.0.9", a)).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::RegisterResponse> moved =
      cluster_->Register(Registration("a", "10.0.0.9", a, again->node_secret()));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->node_id(), a);
  EXPECT_EQ(cluster_
                ->OnAgentMessage([] {
                  v1::AgentMessage m;
                  m.set_node_id("node-999999");
                  return m;
                }())
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClusterTest, ReconnectionWithTheRanksAliveKeepsTheRun) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string job = Submit("1");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  ASSERT_TRUE(cluster_->Register(Registration("a", "10.0.0.1", a, secrets_[a])).ok());
  Heartbeat(a, {Rank(job, 0, 0, v1::RANK_PROCESS_STATE_RUNNING)});
  EXPECT_EQ(Job(job).generation(), 0);
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  Heartbeat(a);  // only the first message after registering is checked
  EXPECT_EQ(Job(job).generation(), 0);
}

TEST_F(ClusterTest, ReRegistrationWithoutTheRanksFailsTheGeneration) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string job = Submit("1");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  // Registered again over a stream not yet seen broken (so with its secret), without its ranks.
  ASSERT_TRUE(cluster_->Register(Registration("a", "10.0.0.1", a, secrets_[a])).ok());
  EXPECT_EQ(Job(job).generation(), 0);
  Heartbeat(a);  // no ranks
  v1::JobStatus s = Job(job);
  // Its ranks are gone: restart, and the same node joins the new generation.
  EXPECT_EQ(s.generation(), 1);
  EXPECT_EQ(s.phase(), v1::JOB_PHASE_RUNNING);
  EXPECT_EQ(s.last_failure(), v1::FAILURE_KIND_NODE_LOST);
}

// Issue #31: an agent whose reports the coordinator cannot read loses its stream at once and
// registers again, over and over; its job stayed Running at step 0 forever. The fifth
// registration within a minute while the node runs the job fails the generation, naming the
// node and why; four, or five spread over more than a minute, do not.
TEST_F(ClusterTest, AStreamThatKeepsBreakingFailsTheGeneration) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string job = Submit("1");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  auto register_again = [&] {
    absl::StatusOr<v1::RegisterResponse> r =
        cluster_->Register(Registration("a", "10.0.0.1", a, secrets_[a]));
    ASSERT_TRUE(r.ok()) << r.status();
    secrets_[a] = r->node_secret();
  };
  for (int i = 0; i < 4; ++i) {
    register_again();
    clock_.Advance(absl::Seconds(20));  // 5 in 80 s: never 5 within 60 s
  }
  register_again();
  EXPECT_EQ(Job(job).generation(), 0);
  EXPECT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  register_again();  // now 5 within 60 s
  v1::JobStatus s = Job(job);
  EXPECT_EQ(s.generation(), 1);
  EXPECT_EQ(s.last_failure(), v1::FAILURE_KIND_NODE_LOST);
  EXPECT_THAT(s.error(), HasSubstr("node " + a +
                                   " lost: its heartbeat stream broke 5 times "
                                   "within 1m"));
}

TEST_F(ClusterTest, GetLogsAsksTheAgentThatRanTheRankAndWaitsForItsAnswer) {
  const std::string a = Connect("a", "10.0.0.1");
  const std::string b = Connect("b", "10.0.0.2");
  const std::string job = Submit("2");
  ASSERT_EQ(Job(job).phase(), v1::JOB_PHASE_RUNNING);
  Drain(*outboxes_[a]);
  Drain(*outboxes_[b]);
  v1::GetLogsRequest req;
  req.set_job_id(job);
  req.set_rank(1);  // b's: nodes are ordered by name
  absl::StatusOr<v1::GetLogsResponse> got = absl::UnknownError("not run");
  std::atomic<bool> answered{false};
  std::thread asker([&] {
    got = cluster_->GetLogs(req, absl::Seconds(60));
    answered = true;
  });
  std::optional<v1::CoordinatorMessage> ask;
  const absl::Time until = absl::Now() + absl::Seconds(30);  // bounds a broken test only
  while (!ask && absl::Now() < until) {
    ask = outboxes_[b]->TryPop();
    if (!ask) std::this_thread::yield();
  }
  ASSERT_TRUE(ask.has_value());
  ASSERT_TRUE(ask->has_send_logs());
  EXPECT_EQ(ask->send_logs().job_id(), job);
  EXPECT_EQ(ask->send_logs().global_rank(), 1u);
  EXPECT_EQ(ask->send_logs().generation(), 0);
  EXPECT_EQ(ask->send_logs().max_bytes(), 64u << 10);
  // Issue #31: another node answering b's command id is not taken for b's answer.
  v1::AgentMessage forged;
  forged.set_node_id(a);
  forged.add_logs()->set_command_id(ask->command_id());
  forged.mutable_logs(0)->set_data("FORGED\x1b[2J\n");
  ASSERT_TRUE(cluster_->OnAgentMessage(forged).ok());
  // Had it been taken, the asker would return with it now (it did before the fix); give it
  // half a second to, which passes either way when the answer is refused.
  for (const absl::Time stop = absl::Now() + absl::Milliseconds(500);
       !answered && absl::Now() < stop;) {
    std::this_thread::yield();
  }
  EXPECT_FALSE(answered) << "GetLogs returned with another node's answer";
  v1::AgentMessage m;
  m.set_node_id(b);
  v1::LogTail* t = m.add_logs();
  t->set_command_id(ask->command_id());
  t->set_generation(0);
  t->set_data("step 3 loss 0.5\n");
  ASSERT_TRUE(cluster_->OnAgentMessage(m).ok());
  asker.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->node_id(), b);
  EXPECT_EQ(got->data(), "step 3 loss 0.5\n");

  // Nobody answers: a deadline error naming the node.
  absl::StatusOr<v1::GetLogsResponse> late = cluster_->GetLogs(req, absl::Milliseconds(50));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr(b));
  Drain(*outboxes_[b]);  // its unanswered SendLogs
  // The agent has no such log: its error comes back.
  std::thread asker2([&] { got = cluster_->GetLogs(req, absl::Seconds(60)); });
  std::optional<v1::CoordinatorMessage> ask2;
  while (!ask2 && absl::Now() < until) {
    ask2 = outboxes_[b]->TryPop();
    if (!ask2) std::this_thread::yield();
  }
  ASSERT_TRUE(ask2.has_value());
  v1::AgentMessage m2;
  m2.set_node_id(b);
  m2.add_logs()->set_command_id(ask2->command_id());
  m2.mutable_logs(0)->set_error("no log of rank 1");
  ASSERT_TRUE(cluster_->OnAgentMessage(m2).ok());
  asker2.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("no log of rank 1"));

  // Ranks outside the job's world: INVALID_ARGUMENT naming its ranks, 4294967295 as itself
  // (issue #31: it read "no rank -1").
  req.set_rank(2);
  EXPECT_EQ(cluster_->GetLogs(req, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  req.set_rank(4294967295u);
  absl::Status huge = cluster_->GetLogs(req, absl::Seconds(1)).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(huge.message(),
            "logs: rank 4294967295 is out of range: job " + job + " has ranks 0 to 1");
  req.set_job_id("job-nope");
  EXPECT_EQ(cluster_->GetLogs(req, absl::Seconds(1)).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterTest, LostNodesAreForgottenAfterTheExpiry) {
  options_.forget_lost_after = absl::Minutes(5);
  Open();
  const std::string a = Connect("a", "10.0.0.1");
  const std::string b = Connect("b", "10.0.0.2");
  cluster_->DetachStream(b, epochs_[b]);
  for (int i = 0; i < 4; ++i) {  // a keeps talking for 4 minutes, b is silent
    clock_.Advance(absl::Minutes(1));
    Heartbeat(a);
    cluster_->Tick();
  }
  ASSERT_EQ(cluster_->ListNodes().nodes_size(), 2);
  EXPECT_EQ(cluster_->ListNodes().nodes(1).state(), v1::NODE_STATE_LOST);
  clock_.Advance(absl::Minutes(1));
  Heartbeat(a);
  cluster_->Tick();
  v1::ListNodesResponse nodes = cluster_->ListNodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).node_id(), a);
  ASSERT_EQ(cluster_->Snapshot(absl::Hours(1)).nodes.size(), 1u);
  // Gone from the database too: a restarted coordinator does not bring it back.
  Open();
  nodes = cluster_->ListNodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).inventory().node_name(), "a");
  // b's agent coming back registers anew under its name.
  EXPECT_TRUE(cluster_->Register(Registration("b", "10.0.0.2")).ok());
  EXPECT_EQ(cluster_->ListNodes().nodes_size(), 2);
}

TEST_F(ClusterTest, LostNodesAreKeptWhenForgettingIsOff) {
  options_.forget_lost_after = absl::ZeroDuration();
  Open();
  const std::string b = Connect("b", "10.0.0.2");
  cluster_->DetachStream(b, epochs_[b]);
  clock_.Advance(absl::Hours(24 * 30));
  cluster_->Tick();
  ASSERT_EQ(cluster_->ListNodes().nodes_size(), 1);
  EXPECT_EQ(cluster_->ListNodes().nodes(0).state(), v1::NODE_STATE_LOST);
}

// Issue #20, item 3: ListNodes comes in pages that together hold every node once, in order.
TEST_F(ClusterTest, ListNodesPagesThroughEveryNode) {
  std::vector<std::string> names;
  for (int i = 0; i < 25; ++i) {
    names.push_back(absl::StrFormat("n-%03d", i));
    ASSERT_TRUE(cluster_->Register(Registration(names.back(), "10.0.0.1")).ok());
  }
  v1::ListNodesRequest req;
  req.set_page_size(10);
  std::vector<std::string> seen;
  std::vector<int> sizes;
  for (int page = 0; page < 10; ++page) {
    absl::StatusOr<v1::ListNodesResponse> r = cluster_->ListNodes(req);
    ASSERT_TRUE(r.ok()) << r.status();
    sizes.push_back(r->nodes_size());
    for (const v1::NodeInfo& n : r->nodes()) seen.push_back(n.inventory().node_name());
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  EXPECT_THAT(sizes, ElementsAre(10, 10, 5));
  EXPECT_EQ(seen, names);
  // The default page holds all 25; a made-up token is refused.
  v1::ListNodesRequest all;
  EXPECT_EQ(cluster_->ListNodes(all)->nodes_size(), 25);
  EXPECT_TRUE(cluster_->ListNodes(all)->next_page_token().empty());
  all.set_page_token("garbage");
  EXPECT_EQ(cluster_->ListNodes(all).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::coordinator
