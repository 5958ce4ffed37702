// API version exchange.
#include "coordinator/cluster/api_version.h"

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"

namespace ringmaster::coordinator {

v1::ApiVersion CoordinatorApiVersion() {
  v1::ApiVersion v;
  v.set_major(kApiMajor);
  v.set_minor(kApiMinor);
  v.set_build("ringmaster-coordinator");
  return v;
}

absl::Status CheckPeerVersion(const v1::ApiVersion& version, std::string_view peer) {
  if (version.major() == kApiMajor && version.minor() >= kOldestSupportedMinor) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(ToAbsl(peer), " speaks API ", version.major(), ".", version.minor(),
                   version.build().empty() ? "" : absl::StrCat(" (", version.build(), ")"),
                   "; this coordinator speaks ", kApiMajor, ".", kApiMinor, " and accepts ",
                   kApiMajor, ".", kOldestSupportedMinor, " or newer minors"));
}

}  // namespace ringmaster::coordinator
