// ParseJobRequirements: MIN:MAX, the restart budget and the planner settings come from the spec;
// spec errors keep the trainer parser's file:line:key messages; bad submissions are refused.
#include "coordinator/plan/job_requirements.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kJob[] = R"(name: sst2
model:
  init_from: models/bert-base-uncased
data:
  train: data/train.tsv
output:
  dir: runs/sst2
train:
  precision: auto
distributed:
  nodes: "2:4"
  procs_per_node: auto
  sharding: full_shard
  compression: auto
restart:
  max_restarts: 5
)";

TEST(JobRequirementsTest, DerivesRendezvousRestartsAndPlan) {
  RendezvousOptions windows;
  windows.last_call = absl::Seconds(2);
  windows.join_timeout = absl::Seconds(60);
  absl::StatusOr<JobRequirements> r =
      ParseJobRequirements(kJob, "sst2.yaml", "/shared/jobs", windows);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.name, "sst2");
  EXPECT_EQ(r->spec.model.init_from, "/shared/jobs/models/bert-base-uncased");
  EXPECT_EQ(r->rendezvous.min_nodes, 2);
  EXPECT_EQ(r->rendezvous.max_nodes, 4);
  EXPECT_EQ(r->rendezvous.last_call, absl::Seconds(2));
  EXPECT_EQ(r->rendezvous.join_timeout, absl::Seconds(60));
  EXPECT_EQ(r->max_restarts, 5);
  EXPECT_EQ(r->plan.procs_per_node, "auto");
  EXPECT_EQ(jobspec::SettingName(r->plan.sharding), "full_shard");
  EXPECT_EQ(jobspec::SettingName(r->plan.compression), "auto");
  EXPECT_EQ(jobspec::SettingName(r->plan.precision), "auto");
}

TEST(JobRequirementsTest, SingleNodeCount) {
  const std::string job = absl::StrReplaceAll(kJob, {{"\"2:4\"", "3"}});
  absl::StatusOr<JobRequirements> r = ParseJobRequirements(job, "j.yaml", "/x");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rendezvous.min_nodes, 3);
  EXPECT_EQ(r->rendezvous.max_nodes, 3);
}

TEST(JobRequirementsTest, SpecErrorsNameFileLineAndKey) {
  std::string job = kJob;
  job += "  bogus: 1\n";
  absl::StatusOr<JobRequirements> r = ParseJobRequirements(job, "sst2.yaml", "/shared/jobs");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("sst2.yaml:"), HasSubstr("restart.bogus")));
}

TEST(JobRequirementsTest, RefusesBadSubmissions) {
  EXPECT_THAT(ParseJobRequirements(kJob, "j.yaml", "jobs").status().message(),
              HasSubstr("not an absolute path"));
  EXPECT_EQ(ParseJobRequirements(kJob, "j.yaml", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string huge(kMaxJobYamlBytes + 1, '#');
  EXPECT_THAT(ParseJobRequirements(huge, "", "/x").status().message(),
              AllOf(HasSubstr("job.yaml"), HasSubstr("at most")));
}

}  // namespace
}  // namespace ringmaster::coordinator
