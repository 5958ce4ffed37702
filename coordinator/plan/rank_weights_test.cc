// RINGMASTER_RANK_WEIGHTS: the format the trainer's own parser reads back, empty for equal
// shares.
#include "coordinator/plan/rank_weights.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/parallel/dist_env.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::DoubleNear;

// What a trainer of rank 0 makes of `weights` in a world of weights.size() ranks.
absl::StatusOr<std::vector<double>> TrainerReads(const std::string& weights, int world) {
  std::map<std::string, std::string> env = {{"WORLD_SIZE", std::to_string(world)},
                                            {"RANK", "0"},
                                            {"MASTER_ADDR", "10.0.0.1"},
                                            {"MASTER_PORT", "29500"},
                                            {"RINGMASTER_RANK_WEIGHTS", weights}};
  absl::StatusOr<trainer::DistEnv> d =
      trainer::ParseDistEnv([&](const char* name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      });
  if (!d.ok()) return d.status();
  return d->rank_weights;
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

}  // namespace
}  // namespace ringmaster::coordinator
