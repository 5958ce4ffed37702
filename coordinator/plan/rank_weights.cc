// RINGMASTER_RANK_WEIGHTS formatting.
#include "coordinator/plan/rank_weights.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::coordinator {

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

}  // namespace ringmaster::coordinator
