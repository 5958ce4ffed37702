// ctest-labels: unit
// The output section's TensorBoard keys: defaults, paths, errors naming the key, the record.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

constexpr char kHead[] = "model: {init_from: m}\ndata: {train: t}\n";

absl::StatusOr<JobSpec> Parse(const std::string& output) {
  return ParseJobSpec(std::string(kHead) + output, "job.yaml", "/jobs");
}

TEST(JobSpecOutputTest, TensorBoardOnByDefaultBesideOutputDir) {
  absl::StatusOr<JobSpec> s = Parse("output: {dir: out}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->output.tensorboard);
  EXPECT_EQ(s->output.tensorboard_dir, "");  // the trainer writes <output.dir>/runs
}

TEST(JobSpecOutputTest, TensorBoardDirResolvesAgainstTheJobFile) {
  absl::StatusOr<JobSpec> s = Parse("output: {dir: out, tensorboard_dir: ../tb/x}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->output.tensorboard_dir, "/tb/x");
  s = Parse("output: {dir: out, tensorboard: false}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->output.tensorboard);
}

TEST(JobSpecOutputTest, ErrorsNameTheKey) {
  absl::StatusOr<JobSpec> s = Parse("output: {dir: out, tensorboard: sometimes}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("output.tensorboard"));
  s = Parse("output: {dir: out, tensorboard: false, tensorboard_dir: tb}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("output.tensorboard_dir: is set while output.tensorboard is false"));
  s = Parse("output: {dir: out, tensorboard_dir: \"tb\\nINFO forged\"}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("output.tensorboard_dir: holds a control character"));
  s = Parse("output: {dir: out, tensorboard_dirs: tb}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("tensorboard_dirs"));
}

TEST(JobSpecOutputTest, RecordedInJobYaml) {
  absl::StatusOr<JobSpec> s = Parse("output: {dir: out, tensorboard_dir: tb}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<JobSpec> back = ParseJobSpec(JobSpecToYaml(*s), "job.yaml", "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->output.tensorboard);
  EXPECT_EQ(back->output.tensorboard_dir, "/jobs/tb");
  s = Parse("output: {dir: out, tensorboard: false}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  back = ParseJobSpec(JobSpecToYaml(*s), "job.yaml", "");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->output.tensorboard);
  EXPECT_EQ(back->output.tensorboard_dir, "");
}

}  // namespace
}  // namespace ringmaster::trainer
