// Whether a host name or address is this machine's loopback: the one check every program uses
// (the control plane's plaintext rule in security/loopback.h, the trainer's /metrics host and
// Gloo listen address).
#pragma once

#include <string_view>

namespace ringmaster {

// True for "localhost" (any case), 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. Brackets around an
// IPv6 literal are accepted. "0.0.0.0", "::" and an empty host bind every interface: not
// loopback.
bool IsLoopbackHost(std::string_view host);

}  // namespace ringmaster
