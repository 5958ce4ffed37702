#include "agent/rotating_log.h"

#include <filesystem>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;

class RotatingLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rotating_log_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Read(const std::string& name) { return ReadFile((dir_ / name).string()).value(); }
  fs::path dir_;
};

TEST_F(RotatingLogTest, RotatesAtTheLimitAndKeepsN) {
  const std::string path = (dir_ / "rank-0.log").string();
  RotatingLog log(path, 10, 2);
  ASSERT_TRUE(log.Open().ok());
  for (const char* chunk : {"aaaaaa\n", "bbbbbb\n", "cccccc\n", "dddddd\n"}) {
    ASSERT_TRUE(log.Write(chunk).ok());
  }
  EXPECT_EQ(Read("rank-0.log"), "dddddd\n");
  EXPECT_EQ(Read("rank-0.log.1"), "cccccc\n");
  EXPECT_EQ(Read("rank-0.log.2"), "bbbbbb\n");
  EXPECT_FALSE(fs::exists(dir_ / "rank-0.log.3"));
}

TEST_F(RotatingLogTest, AppendsToAnExistingFileUpToTheLimit) {
  const std::string path = (dir_ / "x.log").string();
  ASSERT_TRUE(WriteFileAtomic(path, "12345\n").ok());
  RotatingLog log(path, 10, 1);
  ASSERT_TRUE(log.Open().ok());
  ASSERT_TRUE(log.Write("abc\n").ok());  // 10 bytes: still fits
  EXPECT_EQ(Read("x.log"), "12345\nabc\n");
  ASSERT_TRUE(log.Write("z\n").ok());
  EXPECT_EQ(Read("x.log"), "z\n");
  EXPECT_EQ(Read("x.log.1"), "12345\nabc\n");
}

TEST_F(RotatingLogTest, RemembersTheLastErrorLineAcrossChunks) {
  RotatingLog log((dir_ / "e.log").string(), 1 << 20, 1);
  ASSERT_TRUE(log.Open().ok());
  EXPECT_EQ(log.LastErrorLine(), "");
  ASSERT_TRUE(log.Write("t INFO p: starting\nt ERR").ok());
  ASSERT_TRUE(log.Write("OR p: data/train.tsv: not found\nt INFO p: bye\n").ok());
  EXPECT_EQ(log.LastErrorLine(), "t ERROR p: data/train.tsv: not found");
  RotatingLog plain((dir_ / "p.log").string(), 1 << 20, 1);
  ASSERT_TRUE(plain.Open().ok());
  ASSERT_TRUE(plain.Write("one\n\ntwo\n").ok());
  EXPECT_EQ(plain.LastErrorLine(), "two");
  ASSERT_TRUE(plain.Write(std::string(10000, 'x')).ok());
  EXPECT_EQ(plain.LastErrorLine().size(), kMaxErrorLineBytes);
}

}  // namespace
}  // namespace ringmaster::agent
