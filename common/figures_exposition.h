// Renders rank figures (common/rank_status.h) as Prometheus metric families: the one
// place that names the trainer's metrics, shared by a standalone trainer's /metrics and the
// agent's (which re-exposes every rank it runs). Catalogue: docs/metrics.md. Built only with
// prometheus-cpp.
#pragma once

#include <prometheus/metric_family.h>

#include <string>
#include <utility>
#include <vector>

#include "common/rank_status.h"

namespace ringmaster::trainer {

struct LabeledFigures {
  std::vector<std::pair<std::string, std::string>> labels;  // e.g. ringmaster_job, rank
  RankFigures figures;
};

// Every trainer family, one series per rank (per rank and label value where a family has its
// own label). `now_unix` dates the "waiting in a collective" gauge. Series that would lie
// before the first step (loss, last-step time) or before an evaluation are left out.
std::vector<prometheus::MetricFamily> TrainerFamilies(const std::vector<LabeledFigures>& ranks,
                                                      double now_unix);

}  // namespace ringmaster::trainer
