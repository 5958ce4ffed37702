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
  h.now += 2.0;  // the first step, with its start-up costs: no ETA from it
  p.Update(1, 0.7, 1.9e-5, 32);
  ASSERT_EQ(h.writes.size(), 1u);
  EXPECT_THAT(h.writes[0], HasSubstr("ETA warming up"));
  h.now += 10.0;  // 119 more steps of 32 samples in 10 s; 880 steps left → 73.9 s
  p.Update(120, 0.43121, 1.9e-5, 119 * 32);
  ASSERT_EQ(h.writes.size(), 2u);
  const std::string& line = h.writes[1];
  EXPECT_THAT(line, StartsWith("\rtrain [##..................]   120/1000"));
  EXPECT_THAT(line, HasSubstr("loss 0.4312"));
  EXPECT_THAT(line, HasSubstr("lr 1.9e-05"));
  EXPECT_THAT(line, HasSubstr("320.0 samples/s"));  // since the start: 3840 samples in 12 s
  EXPECT_THAT(line, HasSubstr("ETA 1m14s"));
  EXPECT_THAT(line, Not(HasSubstr("\n")));  // the bar stays on its line

  p.Finish();
  EXPECT_EQ(h.writes.back(), "\n");
  p.Finish();  // idempotent
  EXPECT_EQ(h.writes.size(), 3u);
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
  h.now += 1;
  p.Update(1001, 0.3, 1e-5, 32);
  h.now += 99;
  p.Update(1100, 0.3, 1e-5, 99 * 32);  // 1 step/s, 900 left
  ASSERT_EQ(h.writes.size(), 2u);
  EXPECT_THAT(h.writes[1], HasSubstr("step 1100/2000 "));
  EXPECT_THAT(h.writes[1], HasSubstr("samples/s=32.0 eta=15m00s"));
}

// Issue #32: a slow start (compilation, first allocations) made early ETAs swing from minutes to
// seconds. The ETA is the rate over the last kEtaWindowSteps steps, "warming up" before that
// window spans kEtaWarmupSteps steps.
TEST(ProgressReporterTest, EtaWarmsUpThenFollowsTheMovingWindow) {
  Harness h;
  ProgressReporter p("", 1000, 0, false, /*log_interval_seconds=*/0.0, h.clock(), h.sink());
  h.now += 60;  // step 1: a minute of start-up
  p.Update(1, 1.0, 1e-3, 8);
  EXPECT_THAT(h.writes.back(), HasSubstr("eta=warming-up"));
  for (int step = 2; step <= 3; ++step) {
    h.now += 1;
    p.Update(step, 1.0, 1e-3, 8);
    EXPECT_THAT(h.writes.back(), HasSubstr("eta=warming-up")) << step;
  }
  h.now += 1;
  p.Update(4, 1.0, 1e-3, 8);  // 3 steps in 3 s after step 1: 996 left at 1 s each
  EXPECT_THAT(h.writes.back(), HasSubstr("eta=16m36s"));
  // Steps get twice as fast; once the window holds only them, the ETA is theirs alone.
  for (int step = 5; step <= 4 + static_cast<int>(ProgressReporter::kEtaWindowSteps); ++step) {
    h.now += 0.5;
    p.Update(step, 1.0, 1e-3, 8);
  }
  EXPECT_THAT(h.writes.back(), HasSubstr("step 34/1000 "));
  EXPECT_THAT(h.writes.back(), HasSubstr("eta=8m03s"));  // 966 left x 0.5 s
}

// train.log_every_steps, as HF's logging_steps: a line every N steps with the mean loss of those
// N steps and the fractional epoch, and no time-based lines in between.
TEST(ProgressReporterTest, LogEveryStepsPrintsTheWindowMeanLoss) {
  Harness h;
  ProgressReporter p("", 9, 0, false, /*log_interval_seconds=*/0.0, h.clock(), h.sink());
  p.SetLogEverySteps(3);
  for (int step = 1; step <= 8; ++step) {
    h.now += 1;
    p.Update(step, static_cast<double>(step), 1e-3, 8, /*epoch=*/step / 3.0);
  }
  ASSERT_EQ(h.writes.size(), 2u) << h.all();
  EXPECT_THAT(h.writes[0], HasSubstr("step 3/9 loss=2.0000 lr=0.001 epoch=1.00 "));
  EXPECT_THAT(h.writes[1], HasSubstr("step 6/9 loss=5.0000 lr=0.001 epoch=2.00 "));
  p.Finish();
  EXPECT_EQ(h.writes.size(), 2u);
}

TEST(ProgressReporterTest, PlainLineShowsFractionalEpoch) {
  Harness h;
  ProgressReporter p("", 9, 0, false, 10.0, h.clock(), h.sink());
  p.Update(2, 0.5, 1e-3, 8, /*epoch=*/2.0 / 3.0);
  ASSERT_EQ(h.writes.size(), 1u);
  EXPECT_THAT(h.writes[0], HasSubstr(" epoch=0.67 "));
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
