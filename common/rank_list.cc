#include "common/rank_list.h"

#include "absl/strings/str_cat.h"

namespace ringmaster {

std::string FormatRankList(const std::vector<int>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;  // the run ranks[i..j] of consecutive numbers
    while (j + 1 < ranks.size() && ranks[j + 1] <= ranks[j] + 1) ++j;
    const int first = ranks[i], last = ranks[j];
    if (last - first >= 3) {
      absl::StrAppend(&out, out.empty() ? "" : ",", first, "-", last);
    } else {
      for (int r = first; r <= last; ++r) absl::StrAppend(&out, out.empty() ? "" : ",", r);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace ringmaster
