// The ringmaster.v1 API version this coordinator speaks, and the check every peer passes
// (types.proto): a different major, or a minor below the oldest one still supported, is
// FailedPrecondition naming both versions; a newer minor is always accepted.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "ringmaster/v1/types.pb.h"

namespace ringmaster::coordinator {

inline constexpr uint32_t kApiMajor = 1;
inline constexpr uint32_t kApiMinor = 0;
inline constexpr uint32_t kOldestSupportedMinor = 0;

v1::ApiVersion CoordinatorApiVersion();

// `peer` names the caller in the error ("agent", "client"). An absent version reads as 0.0 and
// is refused like any other major mismatch.
absl::Status CheckPeerVersion(const v1::ApiVersion& version, std::string_view peer);

}  // namespace ringmaster::coordinator
