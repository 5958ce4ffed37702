#include "common/warning_limiter.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(WarningLimiterTest, WritesABurstPerWindowAndCountsTheRest) {
  WarningLimiter limiter(absl::Minutes(1), 2);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(limiter.Admit("hb", "refused 1", t0), "refused 1");
  EXPECT_EQ(limiter.Admit("hb", "refused 2", t0), "refused 2");
  for (int i = 3; i <= 2000; ++i) EXPECT_EQ(limiter.Admit("hb", "refused", t0), "");
  // Another kind of warning has its own budget.
  EXPECT_EQ(limiter.Admit("reg", "other", t0), "other");
  // The next window: the first line written says how many were left out.
  EXPECT_EQ(limiter.Admit("hb", "refused 2001", t0 + absl::Minutes(1)),
            "refused 2001 (1998 similar warnings left out)");
  EXPECT_EQ(limiter.Admit("hb", "refused 2002", t0 + absl::Minutes(1)), "refused 2002");
  EXPECT_EQ(limiter.Admit("hb", "refused", t0 + absl::Minutes(1)), "");
  EXPECT_EQ(limiter.Admit("hb", "again", t0 + absl::Minutes(3)),
            "again (1 similar warning left out)");
}

TEST(WarningLimiterTest, KeysAreBoundedAndNewOnesShareAWindowWhenFull) {
  WarningLimiter limiter(absl::Minutes(1), 1, /*max_keys=*/3);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // Three peers fill the table, each with a line and a left-out one.
  for (const char* peer : {"a", "b", "c"}) {
    EXPECT_EQ(limiter.Admit(peer, peer, t0), peer);
    EXPECT_EQ(limiter.Admit(peer, peer, t0), "");
  }
  // A fourth and a fifth peer share the overflow window: one line between them.
  EXPECT_EQ(limiter.Admit("d", "d", t0), "d");
  EXPECT_EQ(limiter.Admit("e", "e", t0), "");
  // The full peers keep their own windows and counts.
  EXPECT_EQ(limiter.Admit("a", "a again", t0 + absl::Minutes(1)),
            "a again (1 similar warning left out)");
  EXPECT_EQ(limiter.Admit("e", "e again", t0 + absl::Minutes(1)),
            "e again (1 similar warning left out)");
}

TEST(WarningLimiterTest, EndedWindowsThatOweNothingMakeRoom) {
  WarningLimiter limiter(absl::Minutes(1), 1, /*max_keys=*/2);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(limiter.Admit("a", "a", t0), "a");
  EXPECT_EQ(limiter.Admit("b", "b", t0), "b");
  EXPECT_EQ(limiter.Admit("b", "b", t0), "");  // b owes a count: it stays
  // A minute later a's window is over and owes nothing: c takes its place with its own window.
  EXPECT_EQ(limiter.Admit("c", "c", t0 + absl::Minutes(1)), "c");
  EXPECT_EQ(limiter.Admit("b", "b again", t0 + absl::Minutes(1)),
            "b again (1 similar warning left out)");
  EXPECT_EQ(limiter.Admit("c", "c", t0 + absl::Minutes(1)), "");
}

}  // namespace
}  // namespace ringmaster
