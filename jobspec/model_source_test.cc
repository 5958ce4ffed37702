// ctest-labels: unit
#include "jobspec/model_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace ringmaster::jobspec {
namespace {

using ::testing::HasSubstr;

TEST(CheckInitFromDirectoryTest, HubNameExplainsSavePretrained) {
  trainer::JobSpec spec;
  spec.source = "job.yaml";
  spec.model.init_from = "/nonexistent-dir-for-test/bert-base-uncased";
  const absl::Status s = CheckInitFromDirectory(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("job.yaml: model.init_from: no directory at "
                                     "/nonexistent-dir-for-test/bert-base-uncased"));
  EXPECT_THAT(s.message(), HasSubstr("does not download from the Hugging Face hub"));
  EXPECT_THAT(s.message(), HasSubstr("from_pretrained('bert-base-uncased')"));
  EXPECT_THAT(s.message(), HasSubstr("save_pretrained('models/bert-base-uncased')"));
}

TEST(CheckInitFromDirectoryTest, DirectoryOrNoInitFromPasses) {
  trainer::JobSpec spec;
  EXPECT_TRUE(CheckInitFromDirectory(spec).ok());
  spec.model.init_from = std::filesystem::temp_directory_path().string();
  EXPECT_TRUE(CheckInitFromDirectory(spec).ok());
}

}  // namespace
}  // namespace ringmaster::jobspec
