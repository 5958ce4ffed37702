#include "agent/path_policy.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class PathPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("path_policy_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data" / "sst2");
    fs::create_directories(dir_ / "data2");
    fs::create_directories(dir_ / "out");
    fs::create_directories(dir_ / "secret");
    std::ofstream(dir_ / "data" / "sst2" / "train.tsv") << "a\t1\n";
    std::ofstream(dir_ / "data2" / "train.tsv") << "a\t1\n";
    std::ofstream(dir_ / "secret" / "key") << "k\n";
    roots_ = {(dir_ / "data").string(), (dir_ / "out").string()};
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status Check(const fs::path& p) {
    return CheckPathWithinRoots("data.train", p.string(), roots_);
  }

  fs::path dir_;
  std::vector<std::string> roots_;
};

TEST_F(PathPolicyTest, NoRootsMeansNoRestriction) {
  EXPECT_TRUE(CheckPathWithinRoots("data.train", "/etc/passwd", {}).ok());
}

TEST_F(PathPolicyTest, InsideARootIsAllowed) {
  EXPECT_TRUE(Check(dir_ / "data" / "sst2" / "train.tsv").ok());
  EXPECT_TRUE(Check(dir_ / "data").ok());                        // the root itself
  EXPECT_TRUE(Check(dir_ / "data" / "sst2" / ".." / "x").ok());  // `..` that stays inside
  roots_ = {(dir_ / "data").string() + "/"};                     // trailing separator
  EXPECT_TRUE(Check(dir_ / "data" / "sst2" / "train.tsv").ok());
}

TEST_F(PathPolicyTest, DotDotEscapeIsRefused) {
  const absl::Status s = Check(dir_ / "data" / ".." / "secret" / "key");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("data.train"));
  EXPECT_THAT(s.message(), HasSubstr((dir_ / "secret" / "key").string()));
  EXPECT_THAT(s.message(), HasSubstr(roots_[0]));
  // Through a directory that does not exist yet: normalised lexically, still outside.
  EXPECT_EQ(Check(dir_ / "out" / "new" / ".." / ".." / "secret").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PathPolicyTest, AbsolutePathElsewhereIsRefused) {
  EXPECT_EQ(Check("/etc/passwd").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(dir_ / "secret" / "key").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckPathWithinRoots("data.train", "relative/x", roots_).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PathPolicyTest, PrefixOfARootNameIsNotInside) {
  const absl::Status s = Check(dir_ / "data2" / "train.tsv");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_F(PathPolicyTest, SymlinkPointingOutsideIsRefused) {
  fs::create_symlink(dir_ / "secret", dir_ / "data" / "escape");
  fs::create_symlink(dir_ / "secret" / "key", dir_ / "data" / "key.tsv");
  EXPECT_EQ(Check(dir_ / "data" / "escape" / "key").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(dir_ / "data" / "key.tsv").code(), absl::StatusCode::kInvalidArgument);
  // A new output dir below a symlinked directory that leads outside.
  EXPECT_EQ(CheckPathWithinRoots("output.dir", (dir_ / "data" / "escape" / "run1").string(), roots_)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PathPolicyTest, SymlinkPointingInsideIsAllowed) {
  fs::create_symlink(dir_ / "data" / "sst2", dir_ / "data" / "current");
  fs::create_symlink(dir_ / "data" / "sst2" / "train.tsv", dir_ / "out" / "train.tsv");
  EXPECT_TRUE(Check(dir_ / "data" / "current" / "train.tsv").ok());
  EXPECT_TRUE(Check(dir_ / "out" / "train.tsv").ok());  // into another root
  // A root that is itself a symlink: compared by what it points to.
  fs::create_symlink(dir_ / "data", dir_ / "data-link");
  roots_ = {(dir_ / "data-link").string()};
  EXPECT_TRUE(Check(dir_ / "data" / "sst2" / "train.tsv").ok());
}

TEST_F(PathPolicyTest, OutputDirThatDoesNotExistYetUnderARootIsAllowed) {
  EXPECT_TRUE(
      CheckPathWithinRoots("output.dir", (dir_ / "out" / "run-7" / "a").string(), roots_).ok());
}

TEST_F(PathPolicyTest, JobPathsAreAllCheckedAndTheFieldIsNamed) {
  trainer::JobSpec spec;
  spec.model.vocab = (dir_ / "data" / "vocab.txt").string();
  spec.data.train = (dir_ / "data" / "sst2" / "train.tsv").string();
  spec.output.dir = (dir_ / "out" / "run").string();
  EXPECT_TRUE(CheckJobPaths(spec, roots_).ok());
  spec.data.eval = (dir_ / "secret" / "key").string();
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(), HasSubstr("data.eval"));
  spec.data.eval.clear();
  spec.output.dir = "/tmp";
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(), HasSubstr("output.dir"));
  spec.output.dir = (dir_ / "out" / "run").string();
  // A model directory inside a root whose weights are a symlink to elsewhere.
  fs::create_directories(dir_ / "data" / "bert");
  fs::create_symlink(dir_ / "secret" / "key", dir_ / "data" / "bert" / "model.safetensors");
  spec.model.init_from = (dir_ / "data" / "bert").string();
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(),
              HasSubstr("model.init_from/model.safetensors"));
}

// output.tensorboard_dir is written by the trainer like output.dir: a job naming one outside the
// roots is refused at start, not left to the trainer to warn about.
TEST_F(PathPolicyTest, TensorBoardDirIsCheckedLikeOutputDir) {
  trainer::JobSpec spec;
  spec.data.train = (dir_ / "data" / "sst2" / "train.tsv").string();
  spec.output.dir = (dir_ / "out" / "run").string();
  spec.output.tensorboard_dir = (dir_ / "out" / "tb" / "run").string();
  EXPECT_TRUE(CheckJobPaths(spec, roots_).ok()) << CheckJobPaths(spec, roots_);
  spec.output.tensorboard_dir = "/tmp/tb";
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(),
              HasSubstr("output.tensorboard_dir '/tmp/tb' resolves to '/tmp/tb', outside"));
  spec.output.tensorboard_dir = (dir_ / "out" / ".." / "secret" / "tb").string();
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(), HasSubstr("output.tensorboard_dir"));
}

// Every file of a model directory counts, not only the well-known ones: a sentence-transformers
// folder's transformer, its tokenizer.json, a linked module directory.
TEST_F(PathPolicyTest, EveryEntryOfAModelDirectoryIsChecked) {
  trainer::JobSpec spec;
  const fs::path st = dir_ / "data" / "minilm";
  fs::create_directories(st / "0_Transformer");
  for (const fs::path& f : {st / "modules.json", st / "0_Transformer" / "config.json"}) {
    std::ofstream(f) << "{}";
  }
  spec.model.init_from = st.string();
  EXPECT_TRUE(CheckJobPaths(spec, roots_).ok()) << CheckJobPaths(spec, roots_);
  fs::create_symlink(dir_ / "secret" / "key", st / "0_Transformer" / "tokenizer.json");
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(),
              HasSubstr("model.init_from/0_Transformer/tokenizer.json"));
  fs::remove(st / "0_Transformer" / "tokenizer.json");
  fs::create_symlink(dir_ / "secret", st / "1_Pooling");
  EXPECT_THAT(CheckJobPaths(spec, roots_).message(), HasSubstr("model.init_from/1_Pooling"));
}

// Issue #20, item 2: "<outside>/a\0/../../<root>/x" is lexically inside the root, but C calls
// stop at the NUL and would create <outside>/a. Any control character is refused.
TEST_F(PathPolicyTest, ControlCharactersAreRefused) {
  const std::string nul = (dir_ / "secret" / "a").string() + std::string("\0", 1) + "/../../../" +
                          (dir_ / "out" / "x").string();
  absl::Status s = CheckPathWithinRoots("output.dir", nul, roots_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output.dir holds a control character (byte 0x00"));
  EXPECT_FALSE(Check((dir_ / "data").string() + "/a\nb").ok());
  EXPECT_FALSE(fs::exists(dir_ / "secret" / "a"));
}

TEST_F(PathPolicyTest, RootHoldingNamesTheRootAPathLiesBelow) {
  EXPECT_EQ(RootHolding((dir_ / "out" / "run1").string(), roots_), roots_[1]);
  EXPECT_EQ(RootHolding((dir_ / "out").string(), roots_), roots_[1]);
  EXPECT_EQ(RootHolding((dir_ / "data2" / "x").string(), roots_), "");
  EXPECT_EQ(RootHolding((dir_ / "out" / "..").string() + "/secret", roots_), "");
}

}  // namespace
}  // namespace ringmaster::agent
