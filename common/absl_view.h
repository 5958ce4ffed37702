// Debian bookworm's Abseil (20220623) has its own absl::string_view, not an alias of
// std::string_view, and StrCat/StrJoin/hash lookups take only the former. Our headers speak
// std::string_view; this converts at the call.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace ringmaster {

inline absl::string_view ToAbsl(std::string_view v) {
  return absl::string_view(v.data(), v.size());
}

}  // namespace ringmaster
