#include "trainer/io/model_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/open_beneath.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Issue #31, finding 2: modules.json named "../../../outside/secretmodel".
TEST(ModelPaths, EntriesLeavingTheDirectoryAreRefused) {
  const std::string by = "m/modules.json: module 0 \"path\"";
  absl::Status s = CheckModelEntry("../../../outside/secretmodel", by);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("m/modules.json: module 0 \"path\" is "
                                     "'../../../outside/secretmodel': it has a '..' component"));
  EXPECT_THAT(CheckModelEntry("/etc/model", by).message(), HasSubstr("an absolute path"));
  EXPECT_THAT(CheckModelEntry("a/../../b", by).message(), HasSubstr("'..' component"));
  EXPECT_THAT(CheckModelEntry(std::string("a\0b", 3), by).message(),
              HasSubstr("'a\\x00b': a control character at offset 1"));
  EXPECT_TRUE(CheckModelEntry("", by).ok());
  EXPECT_TRUE(CheckModelEntry("0_Transformer", by).ok());
  EXPECT_TRUE(CheckModelEntry("a/b/..c", by).ok());
}

class BeneathRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("model_paths_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root/model/sub");
    fs::create_directories(dir_ / "root/shared");
    fs::create_directories(dir_ / "outside");
    std::ofstream(dir_ / "outside/vocab.txt") << "[PAD]\n";
    std::ofstream(dir_ / "root/shared/vocab.txt") << "[PAD]\n";
    std::ofstream(dir_ / "root/model/config.json") << "{}";
    SetAllowedRoot((dir_ / "root").string());
  }
  void TearDown() override {
    SetAllowedRoot("");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(BeneathRootTest, LinksOutOfTheRootAreRefusedInsideOnesPass) {
  const fs::path model = dir_ / "root/model";
  EXPECT_TRUE(CheckModelPathBeneathRoot((model / "config.json").string()).ok());
  EXPECT_TRUE(CheckModelPathBeneathRoot((model / "missing.json").string()).ok());
  fs::create_symlink(dir_ / "outside/vocab.txt", model / "sub/vocab.txt");
  absl::Status s = CheckModelPathBeneathRoot((model / "sub/vocab.txt").string(), "modules.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sub/vocab.txt (named by modules.json) resolves to '"));
  EXPECT_THAT(s.message(), HasSubstr("outside/vocab.txt', outside the allowed root"));
  // A folder linked out: the files below it are outside too.
  fs::create_directory_symlink(dir_ / "outside", model / "linked");
  EXPECT_FALSE(CheckModelPathBeneathRoot((model / "linked/vocab.txt").string()).ok());
  EXPECT_FALSE(CheckModelPathBeneathRoot((model / "../../outside/vocab.txt").string()).ok());
  // A link to another place inside the root is fine (a Hugging Face cache's blobs).
  fs::create_symlink(dir_ / "root/shared/vocab.txt", model / "vocab.txt");
  EXPECT_TRUE(CheckModelPathBeneathRoot((model / "vocab.txt").string()).ok());
  // A dangling link cannot be shown to stay inside.
  fs::create_symlink(dir_ / "nowhere", model / "dangling");
  EXPECT_THAT(CheckModelPathBeneathRoot((model / "dangling").string()).message(),
              HasSubstr("cannot be resolved"));
}

TEST_F(BeneathRootTest, WithoutARootNothingIsRefused) {
  SetAllowedRoot("");
  fs::create_symlink(dir_ / "outside/vocab.txt", dir_ / "root/model/vocab.txt");
  EXPECT_TRUE(CheckModelPathBeneathRoot((dir_ / "root/model/vocab.txt").string()).ok());
}

}  // namespace
}  // namespace ringmaster::trainer
