// RINGMASTER_RANK_WEIGHTS, the value the trainer reads (trainer/parallel/dist_env.h): each rank's
// share of every global batch is proportional to its weight. Format: comma-separated items, one
// per run of ranks: "w" (one rank) or "w*k" (k consecutive ranks of weight w, e.g. the ranks of
// one node); unset means equal shares.
//
// Linux limits one environment string ("NAME=value") to 128 KiB (MAX_ARG_STRLEN), so the value
// has a budget (kMaxRankWeightsBytes). With runs per node that is ~10k nodes of alternating
// speeds; beyond it the planner falls back to equal shares and says so (JobPlan::warnings).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringmaster::coordinator {

inline constexpr size_t kMaxRankWeightsBytes = 128 * 1024 - 64;  // room for the name and NUL

// The variable's value, weights printed with 4 significant digits ("%.4g": shares of a batch
// need no more), equal neighbours as runs. Empty when every weight prints the same: equal
// shares, leave the variable unset.
std::string FormatRankWeights(const std::vector<double>& weights);

}  // namespace ringmaster::coordinator
