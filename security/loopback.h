// Loopback detection for the one case where plaintext gRPC is allowed: --insecure-loopback with a
// listen address or target that only this machine can reach.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/loopback.h"

namespace ringmaster::security {

// common/loopback.h: "localhost", 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104.
using ::ringmaster::IsLoopbackHost;

// The host part of a listen address or gRPC target: "HOST:PORT", "[V6]:PORT", optionally after a
// "dns:///", "ipv4:" or "ipv6:" scheme. An error when there is no ":PORT".
absl::StatusOr<std::string> HostOfAddress(std::string_view address);

// IsLoopbackHost(HostOfAddress(address)); "unix:" sockets are local too. False on a parse error.
bool IsLoopbackAddress(std::string_view address);

}  // namespace ringmaster::security
