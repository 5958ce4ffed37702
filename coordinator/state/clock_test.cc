// FakeClock moves only when advanced, never backwards; RealClock follows the wall clock.
#include "coordinator/state/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

TEST(FakeClockTest, StartsAtGivenTimeAndMovesOnlyWhenAdvanced) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Advance(absl::Milliseconds(-1));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
}

TEST(FakeClockTest, DefaultStartIsFixed) {
  EXPECT_EQ(FakeClock().Now(), absl::FromUnixSeconds(1'700'000'000));
}

TEST(RealClockTest, FollowsWallClock) {
  RealClock clock;
  const absl::Time before = absl::Now();
  const absl::Time t = clock.Now();
  EXPECT_GE(t, before);
  EXPECT_LE(t, absl::Now());
}

}  // namespace
}  // namespace ringmaster::coordinator
