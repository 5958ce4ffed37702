// The Cluster tests' fixture: a Cluster over a JobDb in a scratch file with a FakeClock, agents
// connected through outboxes (Connect / Tick / Drain), and the submission helpers. Shared by
// cluster_test.cc (jobs, scheduling, restarts, traces) and cluster_agents_test.cc (registration,
// agent streams, forgetting, logs, node pages). Test-only.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "coordinator/cluster/api_version.h"
#include "coordinator/cluster/cluster.h"
#include "coordinator/cluster/proto_convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

inline constexpr char kJob[] = R"(name: sst2
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

inline v1::RegisterRequest Registration(const std::string& name, const std::string& address,
                                        const std::string& previous_id = "",
                                        const std::string& previous_secret = "") {
  v1::RegisterRequest r;
  r.mutable_agent_version()->set_major(kApiMajor);
  r.mutable_inventory()->set_node_name(name);
  r.mutable_inventory()->set_hostname("host-" + name);
  r.mutable_inventory()->add_addresses(address);
  r.mutable_inventory()->set_cpu_cores(8);
  r.set_previous_node_id(previous_id);
  r.set_previous_node_secret(previous_secret);
  return r;
}

inline v1::SubmitJobRequest Submission(const std::string& nodes,
                                       const std::string& request_id = "") {
  v1::SubmitJobRequest r;
  r.mutable_client_version()->set_major(kApiMajor);
  r.set_job_yaml(absl::StrReplaceAll(kJob, {{"NODES", nodes}}));
  r.set_base_dir("/shared/jobs");
  r.set_source("sst2.yaml");
  r.set_request_id(request_id);
  return r;
}

// Every message queued in `outbox` so far.
inline std::vector<v1::CoordinatorMessage> Drain(AgentOutbox& outbox) {
  std::vector<v1::CoordinatorMessage> out;
  while (auto m = outbox.TryPop()) out.push_back(*std::move(m));
  return out;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("cluster_test." + std::to_string(getpid()) + "." + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.lost_after = absl::Seconds(10);
    options_.windows.last_call = absl::Seconds(5);
    options_.windows.join_timeout = absl::Seconds(300);
    options_.job.coordinator_address = "coord:7070";
    Open();
  }
  void TearDown() override {
    cluster_.reset();
    db_.reset();
    fs::remove_all(dir_);
  }

  // (Re)starts the coordinator on the same database file.
  void Open() {
    cluster_.reset();
    db_.reset();
    absl::StatusOr<std::unique_ptr<JobDb>> db = JobDb::Open((dir_ / "c.db").string(), clock_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(options_, *db_, clock_);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = *std::move(c);
  }

  // Registers and opens the node's stream; returns its id.
  std::string Connect(const std::string& name, const std::string& address) {
    absl::StatusOr<v1::RegisterResponse> r = cluster_->Register(Registration(name, address));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ(r->node_secret().size(), 64u);
    auto attached = cluster_->AttachStream(r->node_id(), r->node_secret());
    EXPECT_TRUE(attached.ok()) << attached.status();
    outboxes_[r->node_id()] = attached->first;
    epochs_[r->node_id()] = attached->second;
    secrets_[r->node_id()] = r->node_secret();
    return r->node_id();
  }

  void Heartbeat(const std::string& node_id, std::vector<v1::RankProgress> ranks = {}) {
    v1::AgentMessage m;
    m.set_node_id(node_id);
    for (auto& r : ranks) *m.add_ranks() = std::move(r);
    absl::Status st = cluster_->OnAgentMessage(m);
    ASSERT_TRUE(st.ok()) << st;
  }

  std::string Submit(const std::string& nodes) {
    absl::StatusOr<v1::SubmitJobResponse> r = cluster_->SubmitJob(Submission(nodes));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job_id() : "";
  }

  v1::JobStatus Job(const std::string& id) {
    absl::StatusOr<v1::JobStatus> s = cluster_->GetJob(id);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::JobStatus{};
  }

  static v1::RankProgress Rank(const std::string& job, int64_t gen, int rank,
                               v1::RankProcessState state, int code = 0) {
    v1::RankProgress r;
    r.set_job_id(job);
    r.set_generation(gen);
    r.set_global_rank(static_cast<uint32_t>(rank));
    r.set_state(state);
    r.set_exit_code(code);
    return r;
  }

  // A running rank's report with its collective trace.
  v1::RankProgress Traced(const std::string& job, int rank, uint64_t seq, bool inside,
                          absl::Time entered, double comm_seconds = 0, int64_t steps = 0) {
    v1::RankProgress r = Rank(job, 0, rank, v1::RANK_PROCESS_STATE_RUNNING);
    r.set_has_trace(true);
    r.set_collective_seq(seq);
    r.set_collective_op("AllReduceSum");
    r.set_in_collective(inside);
    SetTimestamp(entered, r.mutable_collective_entered_at());
    r.set_comm_seconds(comm_seconds);
    r.set_steps_this_process(steps);
    return r;
  }

  fs::path dir_;
  FakeClock clock_;
  ClusterOptions options_;
  std::unique_ptr<JobDb> db_;
  std::unique_ptr<Cluster> cluster_;
  std::map<std::string, std::shared_ptr<AgentOutbox>> outboxes_;
  std::map<std::string, uint64_t> epochs_;      // of the stream Connect opened
  std::map<std::string, std::string> secrets_;  // node secret of the last Connect
};

}  // namespace ringmaster::coordinator
