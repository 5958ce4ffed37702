#include "common/log.h"

#include <algorithm>

#include "common/log_escape.h"
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

TEST(LogTest, ControlCharactersAreEscapedWhenAskedFor) {
  EXPECT_EQ(EscapeControlCharacters("a\nb\rc\td\x1b[2J\x7f"), "a\\nb\\rc\td\\x1b[2J\\x7f");
  EXPECT_EQ(EscapeControlCharacters(std::string("nul\0", 4)), "nul\\x00");
  EXPECT_EQ(EscapeControlCharacters("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays
  SetLogProgramName("prog");
  const std::string forged = "node a\n2001-01-01T00:00:00.000Z INFO prog: forged\n";
  SetLogEscapeControlCharacters(true);
  testing::internal::CaptureStderr();
  LogInfo(forged);
  std::string err = testing::internal::GetCapturedStderr();
  SetLogEscapeControlCharacters(false);
  EXPECT_THAT(
      err, testing::EndsWith(" INFO prog: node a\\n2001-01-01T00:00:00.000Z INFO prog: forged\n"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  // Off (the trainer): multi-line messages stay as they are.
  testing::internal::CaptureStderr();
  LogInfo("two\nlines");
  EXPECT_THAT(testing::internal::GetCapturedStderr(), testing::EndsWith("two\nlines\n"));
}

}  // namespace
}  // namespace ringmaster
