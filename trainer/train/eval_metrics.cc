#include "trainer/train/eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ringmaster::trainer {
namespace {

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n == 0 || y.size() != n) return 0;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (sxx == 0 || syy == 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

// 1-based ranks, ties given the mean of the ranks they span.
std::vector<double> Ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&v](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = mean;
    i = j + 1;
  }
  return rank;
}

}  // namespace

ClassificationMetrics ClassificationMetricsOf(const std::vector<double>& confusion,
                                              int num_classes) {
  ClassificationMetrics m;
  const size_t C = static_cast<size_t>(num_classes);
  if (C < 2 || confusion.size() != C * C) return m;
  std::vector<double> true_count(C, 0), pred_count(C, 0);
  double total = 0, correct = 0;
  for (size_t t = 0; t < C; ++t) {
    for (size_t p = 0; p < C; ++p) {
      const double v = confusion[t * C + p];
      true_count[t] += v;
      pred_count[p] += v;
      total += v;
      if (t == p) correct += v;
    }
  }
  if (total == 0) return m;
  m.accuracy = correct / total;
  if (C == 2) {
    const double tp = confusion[3], fp = confusion[1], fn = confusion[2];
    m.f1 = 2 * tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 0.0;
  }
  // R_K = (c s - sum_k p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)).
  double pt = 0, pp = 0, tt = 0;
  for (size_t k = 0; k < C; ++k) {
    pt += pred_count[k] * true_count[k];
    pp += pred_count[k] * pred_count[k];
    tt += true_count[k] * true_count[k];
  }
  const double den = (total * total - pp) * (total * total - tt);
  m.matthews_correlation = den > 0 ? (correct * total - pt) / std::sqrt(den) : 0.0;
  return m;
}

RegressionMetrics RegressionMetricsOf(const std::vector<double>& predictions,
                                      const std::vector<double>& labels) {
  RegressionMetrics m;
  m.pearson = Pearson(predictions, labels);
  m.spearmanr = Pearson(Ranks(predictions), Ranks(labels));
  return m;
}

}  // namespace ringmaster::trainer
