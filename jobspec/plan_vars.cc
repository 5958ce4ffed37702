// The plan variables' codecs: RINGMASTER_RANK_WEIGHTS, procs_per_node.
#include "jobspec/plan_vars.h"

#include <charconv>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ringmaster::jobspec {

std::string FormatRankWeights(const std::vector<double>& weights) {
  // Runs of equal (as printed) weights -- the ranks of one node -- become "w*k".
  std::string out;
  bool uniform = true;
  std::string run;
  size_t run_length = 0;
  auto flush = [&] {
    if (run_length == 0) return;
    if (!out.empty()) out += ',';
    out += run_length == 1 ? run : absl::StrCat(run, "*", run_length);
  };
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string w = absl::StrFormat("%.4g", weights[i]);
    if (w == run) {
      ++run_length;
      continue;
    }
    if (i > 0) uniform = false;
    flush();
    run = w;
    run_length = 1;
  }
  flush();
  return uniform ? std::string() : out;
}

absl::StatusOr<std::vector<double>> ParseRankWeights(std::string_view value, int world_size) {
  std::vector<double> weights;
  if (value.empty()) return weights;
  const absl::string_view text(value.data(), value.size());
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    // "w" or "w*k" (k ranks of weight w: keeps the variable short at thousands of ranks).
    double w = 0;
    int repeat = 1;
    const std::vector<absl::string_view> wk = absl::StrSplit(part, absl::MaxSplits('*', 1));
    const bool ok = absl::SimpleAtod(wk[0], &w) && w > 0 && std::isfinite(w) &&
                    (wk.size() == 1 ||
                     (absl::SimpleAtoi(wk[1], &repeat) && repeat >= 1 && repeat <= world_size));
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(kRankWeightsVar, "=", text, ": '", part,
                                                     "' is not a positive weight (optionally "
                                                     "*count)"));
    }
    if (static_cast<int>(weights.size()) + repeat > world_size) break;
    weights.insert(weights.end(), repeat, w);
  }
  if (static_cast<int>(weights.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(kRankWeightsVar, "=", text, " has ",
                                                   weights.size(),
                                                   " weights for WORLD_SIZE=", world_size));
  }
  return weights;
}

absl::StatusOr<int> ParseProcsPerNode(std::string_view value) {
  if (value == "auto") return 0;
  int n = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() || n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", absl::string_view(value.data(), value.size()), "' is not auto or a positive integer"));
  }
  return n;
}

}  // namespace ringmaster::jobspec
