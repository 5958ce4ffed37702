// The evaluation figures run_glue reports, from what evaluation collects: for classification a
// confusion matrix (sums, so ranks can add theirs), for regression every prediction and label.
//   accuracy                 fraction predicted right
//   f1                       binary only (num_labels 2): F1 of class 1, as sklearn's f1_score
//   matthews_correlation     sklearn's matthews_corrcoef (multiclass: Gorodkin's R_K); 0 when
//                            undefined (a constant prediction or label)
//   pearson, spearmanr       regression (num_labels 1); Spearman ranks ties by their mean rank,
//                            as scipy does; 0 when undefined (a constant column)
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ringmaster::trainer {

// One evaluation pass's figures (the training loop's EvaluateAll).
struct EvalResult {
  double loss = 0;
  double accuracy = 0;  // classification only
  int64_t examples = 0;
  // run_glue's other figures where they apply: F1 (binary) and Matthews correlation for
  // classification, Pearson and Spearman for regression (num_labels 1).
  std::optional<double> f1, matthews_correlation, pearson, spearmanr;
};

struct ClassificationMetrics {
  double accuracy = 0;
  std::optional<double> f1;  // binary only
  double matthews_correlation = 0;
};

// confusion[t * C + p]: examples of true class t predicted as p (C = num_classes >= 2).
ClassificationMetrics ClassificationMetricsOf(const std::vector<double>& confusion,
                                              int num_classes);

struct RegressionMetrics {
  double pearson = 0;
  double spearmanr = 0;
};

RegressionMetrics RegressionMetricsOf(const std::vector<double>& predictions,
                                      const std::vector<double>& labels);

}  // namespace ringmaster::trainer
