#include "common/rank_list.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(FormatRankList, ListsShortRunsAndShortensLongOnes) {
  EXPECT_EQ(FormatRankList({}), "");
  EXPECT_EQ(FormatRankList({3}), "3");
  EXPECT_EQ(FormatRankList({0, 1, 2}), "0,1,2");
  EXPECT_EQ(FormatRankList({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(FormatRankList({0, 2, 4, 5, 6, 7, 8, 63}), "0,2,4-8,63");
  EXPECT_EQ(FormatRankList({1, 1, 2}), "1,2");
}

}  // namespace
}  // namespace ringmaster
