// RINGMASTER_RANK_WEIGHTS, the value the trainer reads (trainer/dist/dist_env.h): each rank's
// share of every global batch is proportional to its weight. Format: "w0,w1,...", one positive
// decimal per global rank; unset means equal shares.
//
// Linux limits one environment string ("NAME=value") to 128 KiB (MAX_ARG_STRLEN), so the value
// has a budget (kMaxRankWeightsBytes); at 5-7 bytes a weight that is ~20k ranks. Beyond
// it the planner falls back to equal shares and says so (JobPlan::warnings). A run-length form
// ("w*count", ranks of one node share a weight) would lift the limit; it needs the trainer's
// parser to accept it first.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringmaster::coordinator {

inline constexpr size_t kMaxRankWeightsBytes = 128 * 1024 - 64;  // room for the name and NUL

// The variable's value, weights printed with 4 significant digits ("%.4g": shares of a batch
// need no more). Empty when every weight prints the same: equal shares, leave the variable unset.
std::string FormatRankWeights(const std::vector<double>& weights);

}  // namespace ringmaster::coordinator
