// Turns the transport errors of a call to the coordinator (gRPC's and OpenSSL's text, such as
// "wrong version number") into a sentence that says what is wrong and which flag fixes it. The
// CLI and the agent use it; the flags named are the ones both take.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace ringmaster {

// Where a client was pointed and how.
struct CoordinatorTarget {
  std::string address;     // as given: "10.0.0.5:7070"
  bool plaintext = false;  // --insecure-loopback
  // How the user names the address, for the hint: "--coordinator" or
  // "--coordinator (or $RINGMASTER_COORDINATOR)".
  std::string address_flag = "--coordinator";
};

// `s` unchanged unless it is a connection or TLS failure this recognises; then the same code
// with an explanation first and gRPC's own text after it (for whoever debugs further).
absl::Status ExplainCoordinatorError(const absl::Status& s, const CoordinatorTarget& target);

}  // namespace ringmaster
