// ctest-labels: unit
#include "trainer/train/eval_metrics.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

// Confusion matrix of (true, predicted) pairs.
std::vector<double> Confusion(const std::vector<int>& truth, const std::vector<int>& pred, int C) {
  std::vector<double> m(static_cast<size_t>(C * C), 0);
  for (size_t i = 0; i < truth.size(); ++i) m[truth[i] * C + pred[i]] += 1;
  return m;
}

TEST(ClassificationMetrics, BinaryAsSklearn) {
  // tp 4, fp 1, fn 2, tn 3: accuracy 7/10, F1 8/11, MCC (12 - 2) / sqrt(5 * 6 * 4 * 5).
  const std::vector<int> t = {1, 1, 1, 0, 0, 0, 1, 0, 1, 1};
  const std::vector<int> p = {1, 0, 1, 0, 1, 0, 1, 0, 0, 1};
  ClassificationMetrics m = ClassificationMetricsOf(Confusion(t, p, 2), 2);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.7);
  ASSERT_TRUE(m.f1.has_value());
  EXPECT_NEAR(*m.f1, 8.0 / 11.0, 1e-15);
  EXPECT_NEAR(m.matthews_correlation, 0.408248290463863, 1e-12);
}

TEST(ClassificationMetrics, MulticlassMccAndDegenerateCases) {
  // Gorodkin's R_K by hand: s 6, c 3, true counts (2, 2, 2), predicted (3, 1, 2):
  // (3*6 - (6 + 2 + 4)) / sqrt((36 - 14) * (36 - 12)) = 6 / sqrt(528).
  ClassificationMetrics m =
      ClassificationMetricsOf(Confusion({0, 1, 2, 0, 1, 2}, {0, 2, 1, 0, 0, 2}, 3), 3);
  EXPECT_NEAR(m.matthews_correlation, 6.0 / std::sqrt(528.0), 1e-15);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_FALSE(m.f1.has_value());  // F1 is reported for binary tasks only
  // Every prediction the same class: MCC undefined, reported 0 (as sklearn); F1 of class 1 = 0.
  ClassificationMetrics c = ClassificationMetricsOf(Confusion({0, 1, 1}, {0, 0, 0}, 2), 2);
  EXPECT_EQ(c.matthews_correlation, 0);
  EXPECT_EQ(*c.f1, 0);
  // Perfect.
  ClassificationMetrics perfect = ClassificationMetricsOf(Confusion({0, 1}, {0, 1}, 2), 2);
  EXPECT_DOUBLE_EQ(perfect.matthews_correlation, 1);
  EXPECT_DOUBLE_EQ(*perfect.f1, 1);
}

TEST(RegressionMetrics, PearsonAndSpearmanWithTies) {
  // Spearman is Pearson of the ranks, the tie in y ranked 2.5, 2.5: x = 1..5, y = 1, 2.5, 2.5,
  // 4, 5: sxy 9.5, sxx 10, syy 9.5 -> sqrt(9.5 / 10).
  const std::vector<double> x = {1, 2, 3, 4, 5};
  const std::vector<double> y = {2, 4, 4, 5, 9};
  RegressionMetrics m = RegressionMetricsOf(x, y);
  // Pearson by hand: mx 3, my 4.8; sxy 15, sxx 10, syy 26.8 -> 15 / sqrt(268).
  EXPECT_NEAR(m.pearson, 15.0 / std::sqrt(268.0), 1e-15);
  EXPECT_NEAR(m.spearmanr, std::sqrt(0.95), 1e-15);
  // A monotone but non-linear relation: Spearman 1, Pearson below.
  RegressionMetrics mono = RegressionMetricsOf({1, 2, 3, 4}, {1, 8, 27, 64});
  EXPECT_DOUBLE_EQ(mono.spearmanr, 1);
  EXPECT_LT(mono.pearson, 0.99);
  // A constant column: undefined, 0.
  EXPECT_EQ(RegressionMetricsOf({1, 1, 1}, {1, 2, 3}).pearson, 0);
}

}  // namespace
}  // namespace ringmaster::trainer
