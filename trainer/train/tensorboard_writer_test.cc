// ctest-labels: unit
// The events file writer: its name, the order of names in a directory, buffering until Flush,
// and a failing write reported once without stopping anything.
#include "trainer/train/tensorboard_writer.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {
namespace fs = std::filesystem;

// Records what is written; fails every write from the `fail_from`-th on (0: never).
class FakeSink : public ByteSink {
 public:
  FakeSink(std::vector<std::string>* writes, int fail_from) : writes_(writes), fail_(fail_from) {}
  absl::Status Write(std::string_view data) override {
    writes_->emplace_back(data);
    if (fail_ > 0 && static_cast<int>(writes_->size()) >= fail_) {
      return absl::ResourceExhaustedError("no space left on device");
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string>* writes_;
  int fail_;
};

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "tb_writer_XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(EventsFileNameTest, SecondsAndHost) {
  EXPECT_EQ(EventsFileName(1700000000, "node-1.example"),
            "events.out.tfevents.1700000000.node-1.example");
  // One path component whatever the host name holds.
  EXPECT_EQ(EventsFileName(5, "a/b c"), "events.out.tfevents.5.a_b_c");
  EXPECT_EQ(EventsFileName(5, ""), "events.out.tfevents.5.localhost");
}

TEST(EventsFileNameTest, NewFileSortsAfterEveryEventsFileThere) {
  EXPECT_EQ(NextEventsFileSeconds(100, {}), 100);
  EXPECT_EQ(NextEventsFileSeconds(100, {"events.out.tfevents.90.h", "metrics.jsonl"}), 100);
  // Same second, or a clock behind the previous host's: one past the newest.
  EXPECT_EQ(NextEventsFileSeconds(100, {"events.out.tfevents.100.h"}), 101);
  EXPECT_EQ(NextEventsFileSeconds(100, {"events.out.tfevents.120.h", "events.out.tfevents.7.h"}),
            121);
  EXPECT_EQ(NextEventsFileSeconds(100, {"events.out.tfevents.x.h", "other.150"}), 100);
}

TEST(TensorBoardWriterTest, BuffersUntilFlush) {
  std::vector<std::string> writes;
  TensorBoardWriter w(std::make_unique<FakeSink>(&writes, 0), "f", 10.0);
  w.AddScalars(1, 11.0, {{"train/loss", 0.5f}});
  EXPECT_TRUE(writes.empty());
  w.Flush();
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0], FrameRecord(EncodeFileVersionEvent(10.0)) +
                           FrameRecord(EncodeScalarsEvent(11.0, 1, {{"train/loss", 0.5f}})));
  w.AddScalars(2, 12.0, {});  // nothing to say: no record
  w.AddSessionStart(3, 13.0);
  w.Flush();
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[1], FrameRecord(EncodeSessionStartEvent(13.0, 3)));
  w.Flush();  // nothing buffered: no write
  EXPECT_EQ(writes.size(), 2u);
  EXPECT_FALSE(w.failed());
}

TEST(TensorBoardWriterTest, FailedWriteWarnsOnceAndStopsWriting) {
  std::vector<std::string> writes;
  TensorBoardWriter w(std::make_unique<FakeSink>(&writes, 2), "/runs/events.out.tfevents.1.h", 1.0);
  w.Flush();
  testing::internal::CaptureStderr();
  for (int step = 1; step <= 3; ++step) {
    w.AddScalars(step, 1.0, {{"train/loss", 1.0f}});
    w.Flush();
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(w.failed());
  EXPECT_EQ(writes.size(), 2u) << "writes after the failure";
  size_t warnings = 0;
  for (size_t at = err.find("WARNING"); at != std::string::npos; at = err.find("WARNING", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << err;
  EXPECT_NE(err.find("/runs/events.out.tfevents.1.h: no space left on device"), std::string::npos)
      << err;
}

TEST(TensorBoardWriterTest, CreateMakesTheDirectoryAndNeverOverwrites) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/out/runs";
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> a =
      TensorBoardWriter::Create(tmp.path(), dir, 1000.75, "host");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->path(), dir + "/events.out.tfevents.1000.host");
  (*a)->AddScalars(1, 1001.0, {{"train/loss", 2.0f}});
  (*a)->Flush();
  // A second writer in the same second gets the next second's name: TensorBoard reads it last.
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> b =
      TensorBoardWriter::Create("", dir, 1000.9, "host");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->path(), dir + "/events.out.tfevents.1001.host");
  (*b)->Flush();
  absl::StatusOr<std::string> first = ReadFile((*a)->path());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, FrameRecord(EncodeFileVersionEvent(1000.75)) +
                        FrameRecord(EncodeScalarsEvent(1001.0, 1, {{"train/loss", 2.0f}})));
  absl::StatusOr<std::string> second = ReadFile((*b)->path());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, FrameRecord(EncodeFileVersionEvent(1000.9)));
}

TEST(TensorBoardWriterTest, CreateBelowRootFollowsNoLink) {
  TempDir tmp, elsewhere;
  fs::create_directory(tmp.path() + "/out");
  fs::create_directory_symlink(elsewhere.path(), tmp.path() + "/out/runs");
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> w =
      TensorBoardWriter::Create(tmp.path() + "/out", tmp.path() + "/out/runs", 5.0, "host");
  EXPECT_FALSE(w.ok());
  EXPECT_TRUE(fs::is_empty(elsewhere.path()));
}

}  // namespace
}  // namespace ringmaster::trainer
