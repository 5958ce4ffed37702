// The plan variables' codecs: RINGMASTER_RANK_WEIGHTS round-trips through the one parser the
// trainer reads it with, bad values are refused naming the variable; procs_per_node.
#include "jobspec/plan_vars.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::jobspec {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

// What a trainer makes of `weights` in a world of `world` ranks (DistEnv reads it so).
absl::StatusOr<std::vector<double>> TrainerReads(const std::string& weights, int world) {
  return ParseRankWeights(weights, world);
}

TEST(RankWeightsTest, EqualSharesLeaveTheVariableUnset) {
  EXPECT_EQ(FormatRankWeights(std::vector<double>(16, 1.0)), "");
  EXPECT_EQ(FormatRankWeights({1.00000001, 1.0}), "");  // equal as printed
  EXPECT_EQ(FormatRankWeights({}), "");
}

TEST(RankWeightsTest, MixedWeightsAreReadBackByTheTrainer) {
  const std::vector<double> w = {4.0 / 3, 4.0 / 3, 2.0 / 3, 2.0 / 3, 1, 1};
  const std::string text = FormatRankWeights(w);
  EXPECT_EQ(text, "1.333*2,0.6667*2,1*2");
  absl::StatusOr<std::vector<double>> back = TrainerReads(text, 6);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 6u);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_THAT((*back)[i], DoubleNear(w[i], 1e-3));
}

TEST(RankWeightsTest, SingleRanksAndRunsMix) {
  const std::string text = FormatRankWeights({2, 1, 1, 1, 3});
  EXPECT_EQ(text, "2,1*3,3");
  absl::StatusOr<std::vector<double>> back = TrainerReads(text, 5);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, (std::vector<double>{2, 1, 1, 1, 3}));
}

TEST(RankWeightsTest, BudgetCoversFourThousandNodesOfEightGpusWithMixedSpeeds) {
  std::vector<double> w;
  for (int node = 0; node < 4096; ++node) w.insert(w.end(), 8, node % 2 ? 2.0 / 3 : 4.0 / 3);
  const std::string text = FormatRankWeights(w);
  EXPECT_LE(text.size(), kMaxRankWeightsBytes);
  absl::StatusOr<std::vector<double>> back = TrainerReads(text, 4096 * 8);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 4096u * 8);
  EXPECT_DOUBLE_EQ((*back)[7], 1.333);
  EXPECT_DOUBLE_EQ((*back)[8], 0.6667);
  EXPECT_DOUBLE_EQ((*back)[32767], 0.6667);
}

TEST(RankWeightsTest, BadValuesAreRefusedNamingTheVariableAndTheItem) {
  EXPECT_TRUE(ParseRankWeights("", 4)->empty());
  for (const char* bad : {"1,x", "1,-2", "0,1", "1*0", "1*5", "inf,1", "1,,1"}) {
    absl::StatusOr<std::vector<double>> w = ParseRankWeights(bad, 4);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(w.status().message()),
                HasSubstr(std::string("RINGMASTER_RANK_WEIGHTS=") + bad))
        << w.status();
  }
  absl::StatusOr<std::vector<double>> few = ParseRankWeights("1,2", 4);
  ASSERT_FALSE(few.ok());
  EXPECT_THAT(std::string(few.status().message()), HasSubstr("has 2 weights for WORLD_SIZE=4"));
}

TEST(ProcsPerNodeTest, AutoIsZeroCountsArePositiveAndAnythingElseIsNamed) {
  EXPECT_EQ(*ParseProcsPerNode("auto"), 0);
  EXPECT_EQ(*ParseProcsPerNode("8"), 8);
  for (const char* bad : {"", "0", "-1", "2x", " 2", "+2", "Auto"}) {
    absl::StatusOr<int> n = ParseProcsPerNode(bad);
    ASSERT_FALSE(n.ok()) << bad;
    EXPECT_THAT(std::string(n.status().message()),
                HasSubstr(std::string("'") + bad + "' is not auto or a positive integer"));
  }
}

}  // namespace
}  // namespace ringmaster::jobspec
