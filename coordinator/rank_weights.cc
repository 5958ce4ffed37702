// RINGMASTER_RANK_WEIGHTS formatting.
#include "coordinator/rank_weights.h"

#include "absl/strings/str_format.h"

namespace ringmaster::coordinator {

std::string FormatRankWeights(const std::vector<double>& weights) {
  std::string out;
  out.reserve(weights.size() * 6);
  bool uniform = true;
  std::string first;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string w = absl::StrFormat("%.4g", weights[i]);
    if (i == 0) {
      first = w;
    } else {
      uniform = uniform && w == first;
      out += ',';
    }
    out += w;
  }
  return uniform ? std::string() : out;
}

}  // namespace ringmaster::coordinator
