// "Did you mean": the known name nearest to a mistyped one, for flags and job keys.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster {

// Edit distance: insertions, deletions, substitutions and swaps of neighbours, each 1.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `name` when it is close enough to be a typo: at most a third of
// `name`'s length (and at least 1, at most 3) edits away; ties go to the earlier candidate.
std::optional<std::string> NearestName(std::string_view name,
                                       const std::vector<std::string>& candidates);

}  // namespace ringmaster
