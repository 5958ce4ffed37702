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

}  // namespace
}  // namespace ringmaster
