#include "common/log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(LogTest, FormatsTimestampLevelProgramAndMessage) {
  SetLogProgramName("ringmaster-test");
  absl::Time t = absl::FromUnixMillis(1714566896789);  // 2024-05-01T12:34:56.789Z
  EXPECT_EQ(FormatLogLine(LogLevel::kInfo, "hello", t),
            "2024-05-01T12:34:56.789Z INFO ringmaster-test: hello\n");
  EXPECT_EQ(FormatLogLine(LogLevel::kWarning, "w\n", t),
            "2024-05-01T12:34:56.789Z WARNING ringmaster-test: w\n");
  EXPECT_EQ(FormatLogLine(LogLevel::kError, "e", absl::FromUnixMillis(5)),
            "1970-01-01T00:00:00.005Z ERROR ringmaster-test: e\n");
}

TEST(LogTest, LogWritesOneLineToStderr) {
  SetLogProgramName("prog");
  testing::internal::CaptureStderr();
  LogWarning("disk almost full");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(
      err, testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z WARNING prog: "
                                 "disk almost full\n"));
}

}  // namespace
}  // namespace ringmaster
