// Loopback hosts and addresses.
#include "security/loopback.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::security {

absl::StatusOr<std::string> HostOfAddress(std::string_view address) {
  for (std::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (address.starts_with(scheme)) {
      address.remove_prefix(scheme.size());
      break;
    }
  }
  if (address.starts_with("[")) {
    const size_t close = address.find(']');
    if (close != std::string_view::npos && close + 1 < address.size() &&
        address[close + 1] == ':') {
      return std::string(address.substr(1, close - 1));
    }
  } else if (const size_t colon = address.rfind(':');
             colon != std::string_view::npos && address.find(':') == colon) {
    return std::string(address.substr(0, colon));
  }
  return absl::InvalidArgumentError(absl::StrCat("'",
                                                 absl::string_view(address.data(), address.size()),
                                                 "' is not HOST:PORT (IPv6 as [ADDR]:PORT)"));
}

bool IsLoopbackAddress(std::string_view address) {
  if (address.starts_with("unix:") || address.starts_with("unix-abstract:")) {
    return true;
  }
  absl::StatusOr<std::string> host = HostOfAddress(address);
  return host.ok() && IsLoopbackHost(*host);
}

}  // namespace ringmaster::security
