// Coordinator /metrics: a cluster driven by hand (FakeClock, agents as direct calls) scraped
// through the Collectable and the text format Prometheus reads; the values must match the
// cluster's state at the scrape. Skipped (77) in builds without prometheus-cpp.
#include "coordinator/metrics/coordinator_metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "coordinator/cluster/api_version.h"
#include "coordinator/cluster/proto_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifdef RINGMASTER_HAVE_PROMETHEUS
#include <prometheus/text_serializer.h>
#endif

namespace ringmaster::coordinator {
namespace {

#ifdef RINGMASTER_HAVE_PROMETHEUS

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kJob[] = R"(name: sst2
model:
  init_from: models/bert-tiny
data:
  train: data/train.tsv
output:
  dir: runs/sst2
distributed:
  nodes: "NODES"
restart:
  max_restarts: 3
)";

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    ClusterOptions options;
    options.windows.last_call = absl::Seconds(5);
    options.job.stall_after = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(options, *db_, clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
  }

  std::string Connect(const std::string& name) {
    v1::RegisterRequest r;
    r.mutable_agent_version()->set_major(kApiMajor);
    r.mutable_inventory()->set_node_name(name);
    r.mutable_inventory()->add_addresses("10.0.0." + std::to_string(++hosts_));
    r.mutable_inventory()->set_cpu_cores(8);
    r.mutable_inventory()->set_trainer_samples_per_second(100.0 * hosts_);
    absl::StatusOr<v1::RegisterResponse> reg = cluster_->Register(r);
    EXPECT_TRUE(reg.ok()) << reg.status();
    auto attached = cluster_->AttachStream(reg->node_id(), reg->node_secret());
    EXPECT_TRUE(attached.ok());
    outboxes_.push_back(attached->first);
    return reg->node_id();
  }

  std::string Submit(const std::string& nodes) {
    v1::SubmitJobRequest r;
    r.mutable_client_version()->set_major(kApiMajor);
    r.set_job_yaml(absl::StrReplaceAll(kJob, {{"NODES", nodes}}));
    r.set_base_dir("/shared/jobs");
    r.set_source("sst2.yaml");
    absl::StatusOr<v1::SubmitJobResponse> s = cluster_->SubmitJob(r);
    EXPECT_TRUE(s.ok()) << s.status();
    return s->job_id();
  }

  void Report(const std::string& node, v1::RankProgress r) {
    v1::AgentMessage m;
    m.set_node_id(node);
    *m.add_ranks() = std::move(r);
    ASSERT_TRUE(cluster_->OnAgentMessage(m).ok());
  }

  std::string Scrape() {
    auto collectable = std::make_shared<CoordinatorCollectable>(*cluster_);
    return prometheus::TextSerializer().Serialize(collectable->Collect());
  }

  FakeClock clock_;
  std::unique_ptr<JobDb> db_;
  std::unique_ptr<Cluster> cluster_;
  std::vector<std::shared_ptr<AgentOutbox>> outboxes_;
  int hosts_ = 0;
};

TEST_F(CoordinatorMetricsTest, ScrapeShowsJobsNodesRendezvousAndStalls) {
  const absl::Time start = clock_.Now();
  const std::string job = Submit("2");
  clock_.Advance(absl::Seconds(3));  // gathering for 3 s before the nodes arrive
  const std::string a = Connect("gpu-a");
  const std::string b = Connect("gpu-b");
  const std::string waiting = Submit("1");  // no free node: stays in rendezvous
  ASSERT_EQ(cluster_->GetJob(job)->phase(), v1::JOB_PHASE_RUNNING);

  // Rank 0 waits inside collective #7 since the launch; rank 1 never got there.
  v1::RankProgress r0;
  r0.set_job_id(job);
  r0.set_global_rank(0);
  r0.set_state(v1::RANK_PROCESS_STATE_RUNNING);
  r0.set_step(40);
  r0.set_total_steps(100);
  r0.set_loss(0.5);
  r0.set_samples_per_second(12.5);
  r0.set_has_trace(true);
  r0.set_collective_seq(7);
  r0.set_collective_op("AllReduceSum");
  r0.set_in_collective(true);
  SetTimestamp(clock_.Now(), r0.mutable_collective_entered_at());
  Report(a, r0);
  v1::RankProgress r1 = r0;
  r1.set_global_rank(1);
  r1.set_collective_seq(6);
  r1.set_in_collective(false);
  Report(b, r1);
  clock_.Advance(absl::Seconds(15));
  // a's heartbeat is fresh, b's is 15 s old. Rank 0 took 6 more steps of 32 samples (the job's
  // default global batch) in those 15 s: 12.8 samples/s for the job.
  r0.set_step(46);
  Report(a, r0);

  const std::string text = Scrape();
  const std::string j = "ringmaster_job=\"" + job + "\"";
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{phase=\"running\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{phase=\"rendezvous\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{phase=\"failed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_phase{name=\"sst2\",phase=\"running\"," + j + "} 1"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_phase{name=\"sst2\",phase=\"pending\"," + j + "} 0"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_world_size{" + j + "} 2\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_generation{" + j + "} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_restarts_total{" + j + "} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_step{" + j + "} 46\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_total_steps{" + j + "} 100\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_loss{" + j + "} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_samples_per_second{" + j + "} 12.8\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_rendezvous_seconds{" + j + "} 3\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rendezvous_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rendezvous_seconds_sum 3\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rendezvous_seconds_bucket{le=\"2\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rendezvous_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_stall_seconds{" + j + "} 15\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_stall_missing_rank{rank=\"1\"," + j + "} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("ringmaster_job_stall_missing_rank{rank=\"0\"")));
  // The job still gathering nodes: a series of its own, no stall, no rendezvous length yet.
  const std::string w = "ringmaster_job=\"" + waiting + "\"";
  EXPECT_THAT(text, HasSubstr("ringmaster_job_stall_seconds{" + w + "} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("ringmaster_job_rendezvous_seconds{" + w)));
  EXPECT_THAT(text, HasSubstr("ringmaster_nodes{state=\"busy\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_nodes{state=\"ready\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_nodes{state=\"lost\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_node_heartbeat_age_seconds{node=\"gpu-a\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_node_heartbeat_age_seconds{node=\"gpu-b\"} 15\n"));
  EXPECT_THAT(text,
              HasSubstr("ringmaster_node_throughput_samples_per_second{node=\"gpu-b\"} 200\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_coordinator_start_time_seconds " +
                              std::to_string(absl::ToUnixSeconds(start)) + "\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ringmaster_job_restarts_total counter"));
  EXPECT_THAT(text, HasSubstr("# TYPE ringmaster_rendezvous_seconds histogram"));
  // No straggler scores before timings arrive.
  EXPECT_THAT(text, Not(HasSubstr("ringmaster_job_straggler_seconds{")));
  // Never Prometheus' own target labels.
  EXPECT_THAT(text, Not(HasSubstr("{job=")));
  EXPECT_THAT(text, Not(HasSubstr(",job=")));
  EXPECT_THAT(text, Not(HasSubstr("instance=")));
}

TEST_F(CoordinatorMetricsTest, EndedJobsLeaveThePerJobSeriesAfterAnHour) {
  const std::string job = Submit("1");
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job);
  ASSERT_TRUE(cluster_->CancelJob(cancel).ok());
  clock_.Advance(absl::Minutes(59));
  std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{phase=\"cancelled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ringmaster_job_phase{name=\"sst2\",phase=\"cancelled\","
                              "ringmaster_job=\"" +
                              job + "\"} 1"));
  clock_.Advance(absl::Minutes(2));
  text = Scrape();
  EXPECT_THAT(text, HasSubstr("ringmaster_jobs{phase=\"cancelled\"} 1\n"));  // still counted
  EXPECT_THAT(text, Not(HasSubstr(job)));
  // An empty histogram is still one.
  EXPECT_THAT(text, HasSubstr("ringmaster_rendezvous_seconds_count 0\n"));
}

TEST_F(CoordinatorMetricsTest, RefusedCallsByReasonEveryReasonListed) {
  security::Refusals refusals;
  for (int i = 0; i < 7; ++i) {
    refusals.Admit(security::Refusal::kWrongToken, "ipv4:10.0.0.1:1", "x", clock_.Now());
  }
  refusals.Admit(security::Refusal::kNodeSecret, "ipv4:10.0.0.1:1", "x", clock_.Now());
  auto collectable = std::make_shared<CoordinatorCollectable>(*cluster_, refusals);
  const std::string text = prometheus::TextSerializer().Serialize(collectable->Collect());
  EXPECT_THAT(text, HasSubstr("# TYPE ringmaster_coordinator_refused_calls_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("ringmaster_coordinator_refused_calls_total{reason=\"wrong_token\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("ringmaster_coordinator_refused_calls_total{reason=\"node_secret\"} 1\n"));
  for (const char* zero : {"missing_token", "stream_in_use", "registration"}) {
    EXPECT_THAT(
        text, HasSubstr(std::string("ringmaster_coordinator_refused_calls_total{reason=\"") + zero +
                        "\"} 0\n"));
  }
}

TEST(CoordinatorMetricsServer, ServesOnAFreePort) {
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock);
  ASSERT_TRUE(db.ok());
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Create(ClusterOptions(), **db, clock);
  ASSERT_TRUE(cluster.ok());
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      StartMetricsServer("127.0.0.1:0", **cluster);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  // The same port again cannot be bound.
  absl::StatusOr<std::unique_ptr<MetricsServer>> again =
      StartMetricsServer("127.0.0.1:" + std::to_string((*server)->port()), **cluster);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
}

#else

TEST(CoordinatorMetrics, RefusedWithoutPrometheus) {
  FakeClock clock;
  absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open(":memory:", clock);
  ASSERT_TRUE(db.ok());
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Create(ClusterOptions(), **db, clock);
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(StartMetricsServer("127.0.0.1:0", **cluster).status().code(),
            absl::StatusCode::kUnimplemented);
}

#endif

}  // namespace
}  // namespace ringmaster::coordinator
