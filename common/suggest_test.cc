// ctest-labels: unit
#include "common/suggest.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(EditDistanceTest, CountsEdits) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("--folow", "--follow"), 1u);
  EXPECT_EQ(EditDistance("ab", "ba"), 1u);  // a swap of neighbours is one edit
  EXPECT_EQ(EditDistance("trian", "train"), 1u);
  EXPECT_EQ(EditDistance("abc", "ca"), 3u);
}

TEST(NearestNameTest, SuggestsOnlyCloseNames) {
  const std::vector<std::string> flags = {"--follow", "--rank", "--bytes"};
  EXPECT_EQ(NearestName("--folow", flags), "--follow");
  EXPECT_EQ(NearestName("--rnak", flags), "--rank");
  EXPECT_EQ(NearestName("--coordinator", flags), std::nullopt);
  EXPECT_EQ(NearestName("x", {"y"}), "y");  // one edit is always allowed
  EXPECT_EQ(NearestName("ab", {"cd"}), std::nullopt);
  EXPECT_EQ(NearestName("anything", {}), std::nullopt);
}

}  // namespace
}  // namespace ringmaster
