// Hang diagnosis and straggler scores on synthetic traces: who holds a stalled collective up,
// when the diagnosis abstains, and scores of one slow rank among healthy ones.
#include "coordinator/state/hang_diagnosis.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

RankTrace Inside(uint64_t seq, absl::Duration waited, const std::string& op = "AllReduceSum") {
  RankTrace t;
  t.has_trace = true;
  t.collective_seq = seq;
  t.collective_op = op;
  t.in_collective = true;
  t.entered_at = kNow - waited;
  return t;
}

RankTrace Outside(uint64_t seq) {
  RankTrace t;
  t.has_trace = true;
  t.collective_seq = seq;
  t.collective_op = "AllReduceSum";
  return t;
}

TEST(DiagnoseStall, NamesRanksThatHaveNotEnteredTheCollective) {
  // Ranks 0, 1, 2 wait inside #1234; rank 3 is still computing after #1233.
  std::vector<RankTrace> ranks = {Inside(1234, absl::Seconds(12.3)),
                                  Inside(1234, absl::Seconds(11)), Inside(1234, absl::Seconds(3)),
                                  Outside(1233)};
  std::optional<StallDiagnosis> d = DiagnoseStall(ranks, kNow, absl::Seconds(10));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->seq, 1234u);
  EXPECT_EQ(d->op, "AllReduceSum");
  EXPECT_THAT(d->missing, ElementsAre(3));
  EXPECT_THAT(d->stopped, IsEmpty());  // computing, not stopped
  EXPECT_THAT(d->waiting, ElementsAre(0, 1, 2));
  EXPECT_EQ(d->waited, absl::Seconds(12.3));
}

TEST(DiagnoseStall, NothingBeforeStallAfter) {
  std::vector<RankTrace> ranks = {Inside(7, absl::Seconds(9)), Outside(6)};
  EXPECT_FALSE(DiagnoseStall(ranks, kNow, absl::Seconds(10)).has_value());
  // Exactly at the limit is not yet past it.
  ranks[0] = Inside(7, absl::Seconds(10));
  EXPECT_FALSE(DiagnoseStall(ranks, kNow, absl::Seconds(10)).has_value());
  ranks[0] = Inside(7, absl::Seconds(10.5));
  EXPECT_TRUE(DiagnoseStall(ranks, kNow, absl::Seconds(10)).has_value());
}

TEST(DiagnoseStall, AllRanksInsideTheSameCollectiveIsNoStall) {
  std::vector<RankTrace> ranks = {Inside(50, absl::Seconds(60)), Inside(50, absl::Seconds(61))};
  EXPECT_FALSE(DiagnoseStall(ranks, kNow, absl::Seconds(10)).has_value());
}

// Rank 1 was frozen (SIGSTOP) inside the collective: every rank is inside #50, and only the
// process state tells who holds it up.
TEST(DiagnoseStall, AStoppedRankInsideTheCollectiveIsTheOneMissing) {
  std::vector<RankTrace> ranks = {Inside(50, absl::Seconds(20)), Inside(50, absl::Seconds(21)),
                                  Inside(50, absl::Seconds(19))};
  ranks[1].process_stopped = true;
  std::optional<StallDiagnosis> d = DiagnoseStall(ranks, kNow, absl::Seconds(10));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->seq, 50u);
  EXPECT_THAT(d->missing, ElementsAre(1));
  EXPECT_THAT(d->stopped, ElementsAre(1));
  EXPECT_THAT(d->waiting, ElementsAre(0, 2));
  EXPECT_EQ(d->waited, absl::Seconds(20));
  // Not yet past the limit: nothing.
  EXPECT_FALSE(DiagnoseStall(ranks, kNow, absl::Seconds(30)).has_value());
}

TEST(DiagnoseStall, RanksPastOrDoneWithTheCollectiveAreNotMissing) {
  // Rank 1 left #50 (a broadcast root returns early), rank 2 has gone on to #51 and waits
  // there, rank 3 is stuck in #49: the newest collective waited in is #51.
  std::vector<RankTrace> ranks = {Inside(50, absl::Seconds(30)), Outside(50),
                                  Inside(51, absl::Seconds(20), "Broadcast"),
                                  Inside(49, absl::Seconds(40))};
  std::optional<StallDiagnosis> d = DiagnoseStall(ranks, kNow, absl::Seconds(10));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->seq, 51u);
  EXPECT_EQ(d->op, "Broadcast");
  EXPECT_THAT(d->missing, ElementsAre(0, 1, 3));
  EXPECT_THAT(d->waiting, ElementsAre(2));
  EXPECT_EQ(d->waited, absl::Seconds(20));
}

TEST(DiagnoseStall, UntracedRanksCountAsMissingOnlyOnceOthersWaitPastTheLimit) {
  std::vector<RankTrace> ranks = {Inside(3, absl::Seconds(2)), RankTrace{}};
  EXPECT_FALSE(DiagnoseStall(ranks, kNow, absl::Seconds(10)).has_value());
  ranks[0] = Inside(3, absl::Seconds(15));
  std::optional<StallDiagnosis> d = DiagnoseStall(ranks, kNow, absl::Seconds(10));
  ASSERT_TRUE(d.has_value());
  EXPECT_THAT(d->missing, ElementsAre(1));
  // No rank traced, or none inside a collective: nothing to say.
  EXPECT_FALSE(DiagnoseStall(std::vector<RankTrace>(4), kNow, absl::Seconds(10)).has_value());
  EXPECT_FALSE(DiagnoseStall({Outside(3), Outside(2)}, kNow, absl::Seconds(10)).has_value());
  EXPECT_FALSE(DiagnoseStall({}, kNow, absl::Seconds(10)).has_value());
}

// Feeds `tracker` reports every `interval` for `seconds`: every rank does one step per
// `step_seconds`, and rank r spends comm_per_step[r] of it inside collectives.
void Simulate(StragglerTracker& tracker, const std::vector<double>& comm_per_step,
              double step_seconds, double seconds, absl::Time* now, double* elapsed) {
  for (double t = 0; t < seconds; t += 2.0) {
    *now += absl::Seconds(2);
    *elapsed += 2.0;
    const auto steps = static_cast<int64_t>(*elapsed / step_seconds);
    for (int r = 0; r < static_cast<int>(comm_per_step.size()); ++r) {
      tracker.Observe(r, *now, comm_per_step[static_cast<size_t>(r)] * static_cast<double>(steps),
                      steps);
    }
  }
}

TEST(StragglerTracker, OneSlowRankScoresItsDelay) {
  // Rank 2 computes 0.3 s/step longer; the others wait for it inside the all-reduce.
  StragglerTracker tracker;
  tracker.Reset(4);
  absl::Time now = kNow;
  double elapsed = 0;
  const std::vector<double> comm = {0.35, 0.35, 0.05, 0.35};
  Simulate(tracker, comm, /*step_seconds=*/1.0, /*seconds=*/4, &now, &elapsed);
  EXPECT_FALSE(tracker.Scores().has_value()) << "shorter than min_span";
  Simulate(tracker, comm, 1.0, 60, &now, &elapsed);
  std::optional<std::vector<double>> s = tracker.Scores();
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(*s, ElementsAre(DoubleNear(0, 1e-9), DoubleNear(0, 1e-9), DoubleNear(0.3, 1e-9),
                              DoubleNear(0, 1e-9)));
  ASSERT_TRUE(tracker.CommPerStep(0).has_value());
  EXPECT_NEAR(*tracker.CommPerStep(0), 0.35, 1e-9);
}

TEST(StragglerTracker, TwoRanksTheSlowOneTakesTheWholeDifference) {
  StragglerTracker tracker;
  tracker.Reset(2);
  absl::Time now = kNow;
  double elapsed = 0;
  Simulate(tracker, {0.4, 0.1}, 0.5, 30, &now, &elapsed);
  std::optional<std::vector<double>> s = tracker.Scores();
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(*s, ElementsAre(DoubleNear(0, 1e-9), DoubleNear(0.3, 1e-9)));
}

TEST(StragglerTracker, WindowFollowsAChange) {
  // Rank 1 becomes slow after a minute; a 30 s window forgets the healthy minute.
  StragglerTracker tracker;
  tracker.Reset(3);
  absl::Time now = kNow;
  double elapsed = 0;
  Simulate(tracker, {0.1, 0.1, 0.1}, 1.0, 60, &now, &elapsed);
  ASSERT_TRUE(tracker.Scores().has_value());
  EXPECT_THAT(*tracker.Scores(),
              ElementsAre(DoubleNear(0, 1e-9), DoubleNear(0, 1e-9), DoubleNear(0, 1e-9)));
  // From here on cumulative figures grow at the new rates.
  const double base = 0.1 * elapsed;
  for (int i = 0; i < 20; ++i) {
    now += absl::Seconds(2);
    elapsed += 2;
    const auto steps = static_cast<int64_t>(elapsed);
    const double since = elapsed - 60;
    tracker.Observe(0, now, base + 0.6 * since, steps);
    tracker.Observe(1, now, base + 0.1 * since, steps);
    tracker.Observe(2, now, base + 0.6 * since, steps);
  }
  std::optional<std::vector<double>> s = tracker.Scores();
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR((*s)[1], 0.5, 1e-9);
  EXPECT_NEAR((*s)[0], 0, 1e-9);
}

TEST(StragglerTracker, ResetAndRestartedCountersStartOver) {
  StragglerTracker tracker;
  tracker.Reset(1);
  absl::Time now = kNow;
  double elapsed = 0;
  Simulate(tracker, {0.2}, 1.0, 20, &now, &elapsed);
  EXPECT_TRUE(tracker.Scores().has_value());
  // Counters going backwards: a new process; one figure is no rate.
  tracker.Observe(0, now + absl::Seconds(2), 0.1, 1);
  EXPECT_FALSE(tracker.Scores().has_value());
  tracker.Reset(2);
  EXPECT_FALSE(tracker.Scores().has_value());
  EXPECT_FALSE(tracker.CommPerStep(5).has_value());
  tracker.Observe(7, now, 1, 1);  // out of range: ignored
  tracker.Reset(0);
  EXPECT_FALSE(tracker.Scores().has_value());
}

TEST(StragglerTracker, ReportsWithoutANewStepAreSkipped) {
  // A rank inside a long collective reports growing comm seconds at the same step: the figures
  // would sit mid-step, so the rate waits for the next step.
  StragglerTracker tracker;
  tracker.Reset(1);
  tracker.Observe(0, kNow, 0, 0);
  tracker.Observe(0, kNow + absl::Seconds(10), 5, 0);
  EXPECT_FALSE(tracker.CommPerStep(0).has_value());
  tracker.Observe(0, kNow + absl::Seconds(12), 6, 4);
  ASSERT_TRUE(tracker.CommPerStep(0).has_value());
  EXPECT_NEAR(*tracker.CommPerStep(0), 1.5, 1e-9);
}

}  // namespace
}  // namespace ringmaster::coordinator
