// DynamicLossScaler: skip and back off on non-finite gradients, grow after an interval of
// finite steps, fail as diverged at the minimum scale, and restore exactly from its JSON.
#include "trainer/optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ringmaster::trainer {
namespace {

DynamicLossScaler Make(LossScalerOptions o) {
  absl::StatusOr<DynamicLossScaler> s = DynamicLossScaler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(DynamicLossScalerTest, SkipsAndBacksOffOnOverflowGrowsAfterTheInterval) {
  DynamicLossScaler s = Make({.init_scale = 1024, .growth_interval = 3});
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.Update(true, 1).value(), ScaledStep::kApply);
  EXPECT_EQ(s.Update(true, 2).value(), ScaledStep::kApply);
  EXPECT_EQ(s.Update(false, 3).value(), ScaledStep::kSkip);  // resets the run of finite steps
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.Update(true, 4).value(), ScaledStep::kApply);
  EXPECT_EQ(s.Update(true, 5).value(), ScaledStep::kApply);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.Update(true, 6).value(), ScaledStep::kApply);  // third finite in a row: grows
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.finite_in_a_row(), 0);
  EXPECT_EQ(s.skipped_steps(), 1);
}

TEST(DynamicLossScalerTest, DivergedWhenTheScaleWouldFallBelowTheMinimum) {
  DynamicLossScaler s = Make({.init_scale = 4, .min_scale = 1});
  EXPECT_EQ(s.Update(false, 10).value(), ScaledStep::kSkip);  // 2
  EXPECT_EQ(s.Update(false, 11).value(), ScaledStep::kSkip);  // 1
  absl::StatusOr<ScaledStep> r = s.Update(false, 12);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("at step 12"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("training diverged"), std::string::npos) << r.status();
  EXPECT_EQ(s.scale(), 1);  // unchanged by the refused update
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(DynamicLossScalerTest, RestoredStateContinuesExactly) {
  DynamicLossScaler a = Make({.init_scale = 256, .growth_interval = 4});
  ASSERT_TRUE(a.Update(false, 1).ok());
  ASSERT_TRUE(a.Update(true, 2).ok());
  ASSERT_TRUE(a.Update(true, 3).ok());
  DynamicLossScaler b = Make({.init_scale = 256, .growth_interval = 4});
  ASSERT_TRUE(b.Restore(nlohmann::json::parse(a.ToJson().dump())).ok());
  for (int64_t step = 4; step < 20; ++step) {
    const bool finite = step % 7 != 0;
    ASSERT_EQ(a.Update(finite, step).value(), b.Update(finite, step).value()) << step;
    ASSERT_EQ(a.scale(), b.scale()) << step;
  }
  EXPECT_EQ(a.skipped_steps(), b.skipped_steps());
}

TEST(DynamicLossScalerTest, BadOptionsAndBadStateAreNamed) {
  absl::StatusOr<DynamicLossScaler> s = DynamicLossScaler::Create({.backoff_factor = 1.5});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("backoff_factor"), std::string::npos) << s.status();
  s = DynamicLossScaler::Create({.init_scale = 0.5, .min_scale = 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("init_scale"), std::string::npos) << s.status();

  DynamicLossScaler ok = Make({.growth_interval = 10});
  absl::Status st = ok.Restore(nlohmann::json{{"scale", 8.0}, {"skipped_steps", 0}});
  EXPECT_NE(st.message().find("finite_in_a_row"), std::string::npos) << st;
  st = ok.Restore(nlohmann::json{{"scale", -1.0}, {"finite_in_a_row", 0}, {"skipped_steps", 0}});
  EXPECT_NE(st.message().find("'scale'"), std::string::npos) << st;
  st = ok.Restore(nlohmann::json{{"scale", 8.0}, {"finite_in_a_row", 12}, {"skipped_steps", 0}});
  EXPECT_NE(st.message().find("finite_in_a_row"), std::string::npos) << st;
  st = ok.Restore(nlohmann::json::array());
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ok.scale(), 65536);  // nothing applied from a refused state
}

TEST(AllFiniteTest, FindsInfAndNan) {
  std::vector<float> g(1000, 1.5f);
  EXPECT_TRUE(AllFinite(g.data(), g.size()));
  g[999] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(AllFinite(g.data(), g.size()));
  g[999] = 0;
  g[3] = std::nanf("");
  EXPECT_FALSE(AllFinite(g.data(), g.size()));
  EXPECT_TRUE(AllFinite(g.data(), 3));
}

}  // namespace
}  // namespace ringmaster::trainer
