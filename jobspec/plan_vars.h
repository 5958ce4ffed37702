// The plan variables the coordinator writes and every rank reads, with one codec each, so that
// the writer (coordinator/plan/planner.cc) and the reader (trainer/parallel/dist_env.cc) cannot
// drift: the variables' names, RINGMASTER_RANK_WEIGHTS' format, and distributed.procs_per_node.
//
// RINGMASTER_RANK_WEIGHTS: each rank's share of every global batch is proportional to its
// weight. Format: comma-separated items, one per run of ranks: "w" (one rank) or "w*k" (k
// consecutive ranks of weight w, e.g. the ranks of one node); unset means equal shares.
//
// Linux limits one environment string ("NAME=value") to 128 KiB (MAX_ARG_STRLEN), so the value
// has a budget (kMaxRankWeightsBytes). With runs per node that is ~10k nodes of alternating
// speeds; beyond it the planner falls back to equal shares and says so (JobPlan::warnings).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::jobspec {

// The plan's per-rank variables (coordinator/plan/planner.h writes them; DistEnv reads them).
inline constexpr char kDeviceVar[] = "RINGMASTER_DEVICE";            // cpu | cuda
inline constexpr char kPrecisionVar[] = "RINGMASTER_PRECISION";      // never auto
inline constexpr char kCompressionVar[] = "RINGMASTER_COMPRESSION";  // the wire codec
inline constexpr char kRankWeightsVar[] = "RINGMASTER_RANK_WEIGHTS";

inline constexpr size_t kMaxRankWeightsBytes = 128 * 1024 - 64;  // room for the name and NUL

// The variable's value, weights printed with 4 significant digits ("%.4g": shares of a batch
// need no more), equal neighbours as runs. Empty when every weight prints the same: equal
// shares, leave the variable unset.
std::string FormatRankWeights(const std::vector<double>& weights);

// The weights of `world_size` ranks from a value FormatRankWeights wrote; empty for an empty
// value (equal shares). InvalidArgument naming RINGMASTER_RANK_WEIGHTS and the value when an
// item is not a positive finite weight (optionally *count, 1..world_size) or the count of
// weights differs from `world_size`.
absl::StatusOr<std::vector<double>> ParseRankWeights(std::string_view value, int world_size);

// distributed.procs_per_node: 0 for "auto" (one per GPU, 1 on a CPU node), else the positive
// count. InvalidArgument "'<value>' is not auto or a positive integer" otherwise.
absl::StatusOr<int> ParseProcsPerNode(std::string_view value);

}  // namespace ringmaster::jobspec
