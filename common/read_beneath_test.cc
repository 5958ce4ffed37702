#include "common/read_beneath.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/open_beneath.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ReadBeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("read_beneath_test." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root" / "out" / "checkpoints" / "step-2");
    fs::create_directories(dir_ / "outside" / "step-4");
    std::ofstream(dir_ / "outside" / "secret") << "outside";
    std::ofstream(dir_ / "outside" / "step-4" / "manifest.json") << "outside";
    std::ofstream(out() + "/checkpoints/step-2/manifest.json") << "inside";
  }
  void TearDown() override {
    UnpinRootsForTest();
    fs::remove_all(dir_);
  }
  std::string out() const { return (dir_ / "root" / "out").string(); }
  fs::path dir_;
};

// Issue #31: what the trainer reads back from output.dir follows no link planted there.
TEST_F(ReadBeneathTest, ReadsFollowNoLinkBelowTheRoot) {
  const std::string ckpts = out() + "/checkpoints";
  absl::StatusOr<std::string> text =
      ReadFileBeneath(out(), ckpts + "/step-2/manifest.json", 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "inside");

  // A file replaced by a link, and a directory replaced by one.
  fs::create_symlink(dir_ / "outside" / "secret", ckpts + "/step-2/shard.safetensors");
  fs::create_directory_symlink(dir_ / "outside" / "step-4", ckpts + "/step-4");
  for (const std::string& path :
       {ckpts + "/step-2/shard.safetensors", ckpts + "/step-4/manifest.json"}) {
    text = ReadFileBeneath(out(), path, 1 << 20);
    ASSERT_FALSE(text.ok()) << path << " was read: " << *text;
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(text.status().message(), HasSubstr(path + "' passes through a symbolic link"));
  }
  text = ReadFileBeneath(out(), out() + "/../../outside/secret", 1 << 20);
  EXPECT_THAT(text.status().message(), HasSubstr("'..'"));
  EXPECT_EQ(ReadFileBeneath(out(), ckpts + "/step-9/manifest.json", 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(ReadFileBeneath(out(), ckpts + "/step-2/manifest.json", 3).status().message(),
              HasSubstr("over the limit of 3"));
  EXPECT_THAT(ReadFileBeneath(out(), ckpts + "/step-2", 1 << 20).status().message(),
              HasSubstr("is a directory, expected a regular file"));

  // The listing and lstat say what each entry is, not what it points to.
  absl::StatusOr<std::vector<DirEntryBeneath>> list = ListDirBeneath(out(), ckpts);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "step-2");
  EXPECT_TRUE(S_ISDIR((*list)[0].type));
  EXPECT_EQ((*list)[1].name, "step-4");
  EXPECT_TRUE(S_ISLNK((*list)[1].type));
  absl::StatusOr<struct stat> st = StatBeneath(out(), ckpts + "/step-4");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(S_ISLNK(st->st_mode));
  EXPECT_THAT(ListDirBeneath(out(), ckpts + "/step-4").status().message(),
              HasSubstr("symbolic link"));
  EXPECT_EQ(StatBeneath(out(), ckpts + "/step-9").status().code(), absl::StatusCode::kNotFound);
}

// With output.dir pinned, a swap of the directory itself for a link after the start does not
// redirect the reads either: they go on reading the directory that was pinned.
TEST_F(ReadBeneathTest, APinnedRootIsReadThroughItsHandleAfterASwap) {
  ASSERT_TRUE(PinRoot(out(), (dir_ / "root").string()).ok());
  fs::rename(out(), dir_ / "root" / "moved");
  fs::create_directories(dir_ / "outside" / "checkpoints" / "step-2");
  std::ofstream(dir_ / "outside" / "checkpoints" / "step-2" / "manifest.json") << "forged";
  fs::create_directory_symlink(dir_ / "outside", out());
  absl::StatusOr<std::string> text =
      ReadFileBeneath(out(), out() + "/checkpoints/step-2/manifest.json", 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "inside");
  absl::StatusOr<std::vector<DirEntryBeneath>> list = ListDirBeneath(out(), out() + "/checkpoints");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
}

}  // namespace
}  // namespace ringmaster
