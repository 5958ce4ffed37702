#include "common/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("file_util_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileUtilTest, ReadsRegularFilesAndSymlinksToThem) {
  const std::string file = (dir_ / "a.txt").string();
  std::ofstream(file) << "hello";
  fs::create_symlink(file, dir_ / "link");
  EXPECT_EQ(ReadFile(file).value_or(""), "hello");
  EXPECT_EQ(ReadFile((dir_ / "link").string()).value_or(""), "hello");
  EXPECT_EQ(ReadFile(file, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

// Issue #20: a FIFO nobody writes to must be refused at once, not waited on (a plain open()
// blocks until a writer comes); a device is refused too. The test would hang, not fail, on the
// old code: ctest's timeout catches that.
TEST_F(FileUtilTest, RefusesFifosDevicesAndDirectoriesWithoutBlocking) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> r = ReadFile(fifo);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(fifo + ": is a FIFO, expected a regular file"));
  r = ReadFile("/dev/null");
  EXPECT_THAT(r.status().message(), HasSubstr("/dev/null: is a character device"));
  r = ReadFile(dir_.string());
  EXPECT_THAT(r.status().message(), HasSubstr("is a directory, expected a file"));
  EXPECT_EQ(ReadFile((dir_ / "none").string()).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringmaster
