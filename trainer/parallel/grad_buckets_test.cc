// ctest-labels: unit
#include "trainer/parallel/grad_buckets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Units of the given sizes (floats), side by side from offset 0.
std::vector<UnitShard> Units(const std::vector<size_t>& sizes) {
  std::vector<UnitShard> units;
  size_t at = 0;
  for (size_t n : sizes) {
    units.push_back(UnitShard{at, n, 0, 0, 0, 0});
    at += n;
  }
  return units;
}

TEST(GradBucketsTest, ACapOfZeroGivesOneBucketPerUnitLaunchedByItsOwnUnit) {
  auto b = GradBuckets::Make(Units({10, 20, 30, 5}), 0);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->buckets.size(), 4u);
  for (int u = 0; u < 4; ++u) {
    const GradBucket* k = b->LaunchedBy(u);
    ASSERT_NE(k, nullptr) << u;
    EXPECT_EQ(k->first_unit, u);
    EXPECT_EQ(k->last_unit, u);
  }
  // Backward order: the last unit's bucket first.
  EXPECT_EQ(b->buckets[0].first_unit, 3);
  EXPECT_EQ(b->buckets[0].begin, 60u);
  EXPECT_EQ(b->buckets[0].numel, 5u);
}

TEST(GradBucketsTest, BucketsFillFromTheLastUnitAndCloseWhenTheyReachTheCap) {
  // 4-byte floats: cap 100 bytes = 25 floats. Backward order 3 (5), 2 (30) → 35 ≥ 25 closes
  // {2,3}; 1 (20) < 25 stays open, 0 (10) → 30 closes {0,1}.
  auto b = GradBuckets::Make(Units({10, 20, 30, 5}), 100);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->buckets.size(), 2u);
  EXPECT_EQ(b->buckets[0].first_unit, 2);
  EXPECT_EQ(b->buckets[0].last_unit, 3);
  EXPECT_EQ(b->buckets[0].begin, 30u);
  EXPECT_EQ(b->buckets[0].numel, 35u);
  EXPECT_EQ(b->buckets[1].first_unit, 0);
  EXPECT_EQ(b->buckets[1].last_unit, 1);
  EXPECT_EQ(b->buckets[1].begin, 0u);
  EXPECT_EQ(b->buckets[1].numel, 30u);
  // Launched by the lowest unit of each, the last that backward finishes.
  EXPECT_THAT(b->launch, ElementsAre(1, -1, 0, -1));
}

TEST(GradBucketsTest, ALargeCapGivesOneBucketLaunchedByTheFirstUnit) {
  auto b = GradBuckets::Make(Units({10, 20, 30, 5}), size_t{1} << 30);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->buckets.size(), 1u);
  EXPECT_EQ(b->buckets[0].begin, 0u);
  EXPECT_EQ(b->buckets[0].numel, 65u);
  EXPECT_THAT(b->launch, ElementsAre(0, -1, -1, -1));
}

TEST(GradBucketsTest, EveryUnitIsInExactlyOneBucketForAnyCap) {
  const std::vector<size_t> sizes = {7, 1, 13, 2, 2, 40, 3};
  for (size_t cap = 0; cap < 300; cap += 4) {
    auto b = GradBuckets::Make(Units(sizes), cap);
    ASSERT_TRUE(b.ok()) << b.status();
    std::vector<int> seen(sizes.size(), 0);
    size_t expect_end =
        68;  // Σ sizes; backward order: each bucket ends where the previous one began
    for (const GradBucket& k : b->buckets) {
      EXPECT_EQ(k.begin + k.numel, expect_end) << cap;
      expect_end = k.begin;
      for (int u = k.first_unit; u <= k.last_unit; ++u) ++seen[static_cast<size_t>(u)];
      EXPECT_EQ(b->launch[static_cast<size_t>(k.first_unit)], &k - b->buckets.data());
      // Closed at the cap: without its first unit it was under the cap.
      if (k.first_unit > 0) EXPECT_GE(k.numel * sizeof(float), cap) << cap;
      EXPECT_LT((k.numel - sizes[static_cast<size_t>(k.first_unit)]) * sizeof(float),
                std::max<size_t>(cap, 1))
          << cap;
    }
    EXPECT_EQ(expect_end, 0u);
    EXPECT_THAT(seen, ::testing::Each(1)) << cap;
  }
}

TEST(GradBucketsTest, TheBertLayoutIsContiguousAcrossUnits) {
  BertConfig c;
  c.hidden_size = 32;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;
  c.intermediate_size = 64;
  const ParamLayout layout = MakeBertParamLayout(c);
  const UnitShards parts = UnitShards::Make(layout, 0, 1);
  ASSERT_EQ(parts.units.size(), 5u);
  auto b = GradBuckets::Make(parts.units, size_t{1} << 30);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->buckets[0].numel, layout.total);
}

TEST(GradBucketsTest, AGapBetweenUnitsIsRefused) {
  std::vector<UnitShard> units = Units({10, 20});
  units[1].begin = 12;
  auto b = GradBuckets::Make(units, 0);
  EXPECT_THAT(b.status().message(), HasSubstr("unit 0 ends at 10 but unit 1 begins at 12"));
}

TEST(GradBucketsTest, CapInMegabytesIsMebibytes) {
  EXPECT_EQ(BucketCapBytes(0), 0u);
  EXPECT_EQ(BucketCapBytes(25), 25u * 1024 * 1024);
  EXPECT_EQ(BucketCapBytes(0.5), 512u * 1024);
}

}  // namespace
}  // namespace ringmaster::trainer
