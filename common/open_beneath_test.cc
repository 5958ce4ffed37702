#include "common/open_beneath.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class OpenBeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("open_beneath_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Issue #20, item 2: writes below a root follow no link and no "..", whichever way the open is
// made (openat2, or the O_NOFOLLOW walk of kernels without it).
TEST_F(OpenBeneathTest, OpenBeneathFollowsNoLinkOutOfTheRoot) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root / "out");
  fs::create_directories(outside);
  std::ofstream(outside / "victim") << "keep";
  fs::create_directory_symlink(outside, root / "out" / "ckpt");  // a planted directory link
  fs::create_symlink(outside / "victim", root / "out" / "metrics.jsonl");  // a planted file link
  using Open = absl::StatusOr<int> (*)(const std::string&, const std::string&, int, mode_t);
  for (Open open : {static_cast<Open>(&OpenBeneath), &internal::OpenBeneathByWalk}) {
    const int w = O_WRONLY | O_CREAT | O_APPEND;
    absl::StatusOr<int> fd = open(root.string(), (root / "out/ckpt/x").string(), w, 0644);
    ASSERT_FALSE(fd.ok());
    EXPECT_EQ(fd.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(fd.status().message(), HasSubstr("symbolic link"));
    fd = open(root.string(), (root / "out/metrics.jsonl").string(), w, 0644);
    ASSERT_FALSE(fd.ok());
    EXPECT_THAT(fd.status().message(), HasSubstr("symbolic link"));
    fd = open(root.string(), (root / "out/../../outside/victim").string(), O_RDONLY, 0);
    ASSERT_FALSE(fd.ok());
    EXPECT_THAT(fd.status().message(), HasSubstr("'..'"));
    fd = open(root.string(), (outside / "victim").string(), O_RDONLY, 0);
    ASSERT_FALSE(fd.ok());
    EXPECT_THAT(fd.status().message(), HasSubstr("is not below"));
    fd = open(root.string(), (root / "out").string() + std::string("\0/x", 3), O_RDONLY, 0);
    ASSERT_FALSE(fd.ok());
    EXPECT_THAT(fd.status().message(), HasSubstr("control character (byte 0x00"));
    fd = open(root.string(), (root / "out/new.txt").string(), w, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status();
    ::close(*fd);
  }
  EXPECT_TRUE(fs::exists(root / "out/new.txt"));
  EXPECT_EQ(ReadFile((outside / "victim").string()).value_or(""), "keep");
  EXPECT_FALSE(fs::exists(outside / "x"));
}

TEST_F(OpenBeneathTest, MakeDirsBeneathRefusesALinkOnTheWay) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  ASSERT_TRUE(MakeDirsBeneath(root.string(), (root / "a/b/c").string()).ok());
  EXPECT_TRUE(fs::is_directory(root / "a/b/c"));
  EXPECT_TRUE(MakeDirsBeneath(root.string(), root.string()).ok());
  fs::create_directory_symlink(outside, root / "a/link");
  absl::Status s = MakeDirsBeneath(root.string(), (root / "a/link/ranks").string());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("symbolic link"));
  EXPECT_FALSE(fs::exists(outside / "ranks"));
}

TEST_F(OpenBeneathTest, WriteFileAtomicBeneathNeverWritesThroughALink) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root / "out");
  fs::create_directories(outside);
  std::ofstream(outside / "victim") << "keep";
  ASSERT_TRUE(WriteFileAtomicBeneath(root.string(), (root / "out/a.json").string(), "new").ok());
  EXPECT_EQ(ReadFile((root / "out/a.json").string()).value_or(""), "new");
  // A link in the final name is replaced, not written through.
  fs::create_symlink(outside / "victim", root / "out" / "b.json");
  ASSERT_TRUE(WriteFileAtomicBeneath(root.string(), (root / "out/b.json").string(), "b").ok());
  EXPECT_FALSE(fs::is_symlink(root / "out/b.json"));
  EXPECT_EQ(ReadFile((outside / "victim").string()).value_or(""), "keep");
  // A link in the directory is refused.
  fs::create_directory_symlink(outside, root / "out" / "ranks");
  absl::Status s = WriteFileAtomicBeneath(root.string(), (root / "out/ranks/r.json").string(), "x");
  EXPECT_THAT(s.message(), HasSubstr("symbolic link"));
  EXPECT_FALSE(fs::exists(outside / "r.json"));
}

TEST(FindControlCharacterTest, FindsTheFirstControlByte) {
  EXPECT_EQ(FindControlCharacter("/data/out"), std::nullopt);
  EXPECT_EQ(FindControlCharacter(std::string("/a\0b", 4)), 2u);
  EXPECT_EQ(FindControlCharacter("a\tb"), 1u);
  EXPECT_EQ(FindControlCharacter("a\x7f"), 1u);
  EXPECT_EQ(FindControlCharacter("caf\xc3\xa9"), std::nullopt);
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Issue #31, finding 6a: a pinned root keeps its directory when the path is swapped for a link
// to somewhere else; every *Beneath call lands in the directory opened at PinRoot.
TEST_F(OpenBeneathTest, PinnedRootSurvivesASwapForALink) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root / "out");
  fs::create_directories(outside);
  const std::string out = (root / "out").string();
  ASSERT_TRUE(PinRoot(out, root.string()).ok());
  EXPECT_TRUE(IsPinnedRoot(out + "/"));
  fs::rename(root / "out", root / "moved");
  fs::create_directory_symlink(outside, root / "out");
  EXPECT_TRUE(AppendFileBeneath(out, out + "/metrics.jsonl", "line\n").ok());
  EXPECT_TRUE(MakeDirsBeneath(out, out + "/checkpoints/.tmp").ok());
  EXPECT_TRUE(WriteFileAtomicBeneath(out, out + "/checkpoints/.tmp/a", "x").ok());
  EXPECT_TRUE(RenameBeneath(out, out + "/checkpoints/.tmp", out + "/checkpoints/step-1").ok());
  EXPECT_TRUE(RemoveAllBeneath(out, out + "/metrics.jsonl").ok());
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(Slurp(root / "moved" / "checkpoints" / "step-1" / "a"), "x");
  UnpinRootsForTest();
  EXPECT_FALSE(IsPinnedRoot(out));
}

// RemoveAllBeneath removes a link met on the way, never what it points to.
TEST_F(OpenBeneathTest, RemoveAllBeneathFollowsNoLink) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root / "out" / "ckpt");
  fs::create_directories(outside);
  std::ofstream(outside / "victim") << "keep";
  fs::create_directory_symlink(outside, root / "out" / "ckpt" / "link");
  ASSERT_TRUE(RemoveAllBeneath(root.string(), (root / "out").string()).ok());
  EXPECT_FALSE(fs::exists(root / "out"));
  EXPECT_EQ(Slurp(outside / "victim"), "keep");
  EXPECT_TRUE(RemoveAllBeneath(root.string(), (root / "missing").string()).ok());
}

// Issue #31, finding 6b: an append refuses a file with more than one link; a confined reader
// refuses one as input.
TEST_F(OpenBeneathTest, HardLinksAreNotAppendedToOrReadWhenRefused) {
  const fs::path root = dir_ / "root", outside = dir_ / "outside";
  fs::create_directories(root);
  fs::create_directories(outside);
  std::ofstream(outside / "victim") << "keep";
  fs::create_hard_link(outside / "victim", root / "metrics.jsonl");
  absl::Status s =
      AppendFileBeneath(root.string(), (root / "metrics.jsonl").string(), "appended\n");
  EXPECT_THAT(s.message(), HasSubstr("has 2 hard links"));
  EXPECT_EQ(Slurp(outside / "victim"), "keep");
  EXPECT_TRUE(ReadFile((root / "metrics.jsonl").string()).ok());
  SetRefuseHardLinkedInputs(true);
  absl::StatusOr<std::string> read = ReadFile((root / "metrics.jsonl").string());
  SetRefuseHardLinkedInputs(false);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("has 2 hard links"));
}

}  // namespace
}  // namespace ringmaster
