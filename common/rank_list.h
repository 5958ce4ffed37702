// Lists of ranks for people: "0,1,2", with runs of four or more shortened to "4-63", so that a
// line naming the ranks of a large job stays short.
#pragma once

#include <string>
#include <vector>

namespace ringmaster {

// `ranks` sorted ascending (duplicates are shown once); "" for none.
std::string FormatRankList(const std::vector<int>& ranks);

}  // namespace ringmaster
