#include "common/progress.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A clock the test moves by hand and a sink that keeps every write.
struct Harness {
  double now = 100.0;
  std::vector<std::string> writes;
  ProgressReporter::Clock clock() {
    return [this] { return now; };
  }
  ProgressReporter::Sink sink() {
    return [this](std::string_view s) { writes.emplace_back(s); };
  }
  std::string all() const {
    std::string out;
    for (const auto& w : writes) out += w;
    return out;
  }
};

TEST(FormatDurationTest, Units) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(45), "45s");
  EXPECT_EQ(FormatDuration(83), "1m23s");
  EXPECT_EQ(FormatDuration(65), "1m05s");
  EXPECT_EQ(FormatDuration(3725), "1h02m05s");
  EXPECT_EQ(FormatDuration(3600 * 30 + 1), "30h00m01s");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(ProgressReporterTest, InteractiveRedrawsOneLineWithBar) {
  Harness h;
  ProgressReporter p("train", 1000, 0, /*interactive=*/true, 10.0, h.clock(), h.sink());
  h.now += 10.0;  // 120 steps of 32 samples in 10 s: 384 samples/s, 880 steps left → 73 s
  p.Update(120, 0.43121, 1.9e-5, 120 * 32);
  ASSERT_EQ(h.writes.size(), 1u);
  const std::string& line = h.writes[0];
  EXPECT_THAT(line, StartsWith("\rtrain [##..................]   120/1000"));
  EXPECT_THAT(line, HasSubstr("loss 0.4312"));
  EXPECT_THAT(line, HasSubstr("lr 1.9e-05"));
  EXPECT_THAT(line, HasSubstr("384.0 samples/s"));
  EXPECT_THAT(line, HasSubstr("ETA 1m13s"));
  EXPECT_THAT(line, Not(HasSubstr("\n")));  // the bar stays on its line

  p.Finish();
  EXPECT_EQ(h.writes.back(), "\n");
  p.Finish();  // idempotent
  EXPECT_EQ(h.writes.size(), 2u);
}

TEST(ProgressReporterTest, InteractiveFullBarAtEnd) {
  Harness h;
  ProgressReporter p("", 10, 0, true, 10.0, h.clock(), h.sink());
  h.now += 5;
  p.Update(10, 0.1, 1e-3, 80);
  EXPECT_THAT(h.writes.back(), HasSubstr("[####################]  10/10"));
  EXPECT_THAT(h.writes.back(), HasSubstr("ETA 0s"));
}

TEST(ProgressReporterTest, InteractiveRedrawIsRateLimitedButFinishShowsLatest) {
  Harness h;
  ProgressReporter p("", 100, 0, true, 10.0, h.clock(), h.sink());
  h.now += 1;
  p.Update(1, 1.0, 1e-3, 8);
  h.now += 0.001;
  p.Update(2, 0.5, 1e-3, 8);  // too soon after the last redraw
  EXPECT_EQ(h.writes.size(), 1u);
  p.Finish();
  ASSERT_EQ(h.writes.size(), 3u);
  EXPECT_THAT(h.writes[1], HasSubstr("2/100"));
  EXPECT_EQ(h.writes[2], "\n");
}

TEST(ProgressReporterTest, MessageClearsAndRedrawsBar) {
  Harness h;
  ProgressReporter p("", 100, 0, true, 10.0, h.clock(), h.sink());
  h.now += 1;
  p.Update(50, 0.25, 1e-4, 16);
  p.Message("saved checkpoint step-50");
  ASSERT_EQ(h.writes.size(), 2u);
  const std::string& m = h.writes[1];
  EXPECT_THAT(m, StartsWith("\r\033[K"));
  // The message is a whole line, and the bar is drawn again after it.
  size_t msg_at = m.find("INFO");
  size_t nl = m.find("saved checkpoint step-50\n");
  size_t bar = m.find("[##########..........]");
  ASSERT_NE(msg_at, std::string::npos);
  ASSERT_NE(nl, std::string::npos);
  ASSERT_NE(bar, std::string::npos);
  EXPECT_LT(msg_at, nl);
  EXPECT_LT(nl, bar);
}

TEST(ProgressReporterTest, DestructorEndsOpenBarLine) {
  Harness h;
  {
    ProgressReporter p("", 100, 0, true, 10.0, h.clock(), h.sink());
    h.now += 1;
    p.Update(1, 1.0, 1e-3, 8);
  }
  EXPECT_EQ(h.writes.back(), "\n");
}

TEST(ProgressReporterTest, PlainModeRateLimitsAndAlwaysPrintsLastStep) {
  Harness h;
  ProgressReporter p("", 25, 0, /*interactive=*/false, 10.0, h.clock(), h.sink());
  for (int step = 1; step <= 25; ++step) {
    h.now += 1.0;
    p.Update(step, 1.0 / step, 2e-5, 4);
  }
  // First step, then every 10 s (steps 11 and 21), then the last step.
  ASSERT_EQ(h.writes.size(), 4u) << h.all();
  EXPECT_THAT(h.writes[0], HasSubstr("step 1/25 "));
  EXPECT_THAT(h.writes[1], HasSubstr("step 11/25 "));
  EXPECT_THAT(h.writes[2], HasSubstr("step 21/25 "));
  EXPECT_THAT(h.writes[3], HasSubstr("step 25/25 "));
  for (const auto& w : h.writes) {
    EXPECT_THAT(w, Not(HasSubstr("\r")));
    EXPECT_THAT(w, AllOf(HasSubstr(" INFO "), EndsWith("\n")));
  }
  EXPECT_THAT(h.writes[3], HasSubstr("loss=0.0400 lr=2e-05 samples/s=4.0 eta=0s"));
  p.Finish();  // the last step is already printed and there is no bar to end
  EXPECT_EQ(h.writes.size(), 4u);
}

TEST(ProgressReporterTest, PlainModeFinishPrintsUnshownState) {
  Harness h;
  ProgressReporter p("eval", 0, 0, false, 10.0, h.clock(), h.sink());
  h.now += 1;
  p.Update(1, 0.5, 0, 8);
  h.now += 1;
  p.Update(2, 0.4, 0, 8);
  EXPECT_EQ(h.writes.size(), 1u);
  p.Finish();
  ASSERT_EQ(h.writes.size(), 2u);
  // Unknown total: no "/total" and no ETA.
  EXPECT_THAT(h.writes[1], HasSubstr("eval step 2 loss=0.4000 lr=0 samples/s=8.0\n"));
}

TEST(ProgressReporterTest, EtaUsesRateSinceStartStep) {
  Harness h;
  // Resumed at step 1000 of 2000: restored steps must not count as progress made here.
  ProgressReporter p("", 2000, 1000, false, 10.0, h.clock(), h.sink());
  h.now += 100;
  p.Update(1100, 0.3, 1e-5, 100 * 32);  // 1 step/s, 900 left
  ASSERT_EQ(h.writes.size(), 1u);
  EXPECT_THAT(h.writes[0], HasSubstr("step 1100/2000 "));
  EXPECT_THAT(h.writes[0], HasSubstr("samples/s=32.0 eta=15m00s"));
}

TEST(ProgressReporterTest, PlainMessageIsALogLine) {
  Harness h;
  ProgressReporter p("", 10, 0, false, 10.0, h.clock(), h.sink());
  p.Message("hello");
  ASSERT_EQ(h.writes.size(), 1u);
  EXPECT_THAT(h.writes[0], AllOf(HasSubstr(" INFO "), EndsWith(": hello\n")));
}

}  // namespace
}  // namespace ringmaster
