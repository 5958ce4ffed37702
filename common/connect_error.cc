#include "common/connect_error.h"

#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

// `lower_text`: already lower-cased; `part` in any case.
bool Has(const std::string& lower_text, std::string_view part) {
  return absl::StrContains(lower_text, absl::AsciiStrToLower(std::string(part)));
}

// The explanation for gRPC's `text`, or "" when it is not one we know.
std::string Explain(const std::string& text, const CoordinatorTarget& t) {
  const std::string& a = t.address;
  if (Has(text, "wrong version number") || Has(text, "WRONG_VERSION_NUMBER")) {
    // A TLS client read a plaintext reply.
    return absl::StrCat("the coordinator at ", a,
                        " speaks plaintext but this client uses TLS: the coordinator runs with "
                        "--insecure-loopback. Pass --insecure-loopback here too (loopback "
                        "only), or start the coordinator with --tls-cert and --tls-key");
  }
  if (Has(text, "certificate verify failed") || Has(text, "CERTIFICATE_VERIFY_FAILED")) {
    return absl::StrCat("the coordinator's certificate at ", a,
                        " is not trusted: pass the CA that signed it with --tls-ca FILE");
  }
  if (Has(text, "peer name") || Has(text, "hostname mismatch") ||
      Has(text, "not in peer certificate")) {
    return absl::StrCat("the coordinator's certificate does not carry the name in ", t.address_flag,
                        " (", a, "): pass the name it carries with --tls-server-name NAME");
  }
  if (Has(text, "certificate required") || Has(text, "peer did not return a certificate") ||
      Has(text, "handshake failure")) {
    return absl::StrCat("the coordinator at ", a,
                        " refused the TLS handshake; it requires a client certificate (mutual "
                        "TLS): pass --tls-cert FILE and --tls-key FILE");
  }
  if (Has(text, "connection refused")) {
    return absl::StrCat("no coordinator is listening at ", a,
                        " (connection refused): start it, or point ", t.address_flag,
                        " HOST:PORT at the one that runs");
  }
  if (Has(text, "DNS resolution failed") || Has(text, "name or service not known") ||
      Has(text, "Could not resolve")) {
    return absl::StrCat("cannot resolve the host in ", t.address_flag, " (", a,
                        "): check the name");
  }
  if (t.plaintext && (Has(text, "socket closed") || Has(text, "connection reset") ||
                      Has(text, "End of TCP stream") || Has(text, "Broken pipe"))) {
    // A plaintext client whose first bytes a TLS server rejected.
    return absl::StrCat("the coordinator at ", a,
                        " closed the plaintext connection: it most likely expects TLS. Drop "
                        "--insecure-loopback (and pass --tls-ca FILE when its certificate is "
                        "not from the system's roots)");
  }
  // Not gRPC's bare "Deadline Exceeded": a connected call that ran out of time says that too.
  if (Has(text, "failed to connect to all addresses") || Has(text, "timed out") ||
      Has(text, "No route to host")) {
    return absl::StrCat("cannot reach the coordinator at ", a, ": check ", t.address_flag,
                        " and that the coordinator runs and its port is reachable from here");
  }
  return "";
}

}  // namespace

absl::Status ExplainCoordinatorError(const absl::Status& s, const CoordinatorTarget& target) {
  if (s.code() != absl::StatusCode::kUnavailable &&
      s.code() != absl::StatusCode::kDeadlineExceeded && s.code() != absl::StatusCode::kUnknown) {
    return s;
  }
  const std::string why = Explain(absl::AsciiStrToLower(std::string(s.message())), target);
  if (why.empty()) return s;
  return absl::Status(s.code(), absl::StrCat(why, " [gRPC: ", s.message(), "]"));
}

}  // namespace ringmaster
