// Refused calls: counters by reason and warnings limited per reason and peer host.
#include "security/refusals.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "common/log.h"

namespace ringmaster::security {

std::string_view RefusalName(Refusal reason) {
  switch (reason) {
    case Refusal::kMissingToken:
      return "missing_token";
    case Refusal::kWrongToken:
      return "wrong_token";
    case Refusal::kNodeSecret:
      return "node_secret";
    case Refusal::kStreamInUse:
      return "stream_in_use";
    case Refusal::kRegistration:
      return "registration";
    case Refusal::kResourceLimit:
      return "resource_limit";
  }
  return "unknown";
}

std::string PeerHost(std::string_view peer) {
  // "scheme:host:port": the port is the digits after the last ':', when something precedes
  // them beyond the scheme.
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string_view::npos || colon == scheme || colon + 1 == peer.size()) {
    return std::string(peer);
  }
  for (size_t i = colon + 1; i < peer.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(peer[i]))) return std::string(peer);
  }
  return std::string(peer.substr(0, colon));
}

std::string Refusals::Admit(Refusal reason, std::string_view peer, std::string_view line,
                            absl::Time now) {
  counts_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  return limiter_.Admit(absl::StrCat(ToAbsl(RefusalName(reason)), " ", PeerHost(peer)), line, now);
}

void Refusals::Refuse(Refusal reason, std::string_view peer, std::string_view line) {
  const std::string admitted = Admit(reason, peer, line);
  if (!admitted.empty()) LogWarning(admitted);
}

Refusals& ProcessRefusals() {
  static Refusals* const refusals = new Refusals();
  return *refusals;
}

}  // namespace ringmaster::security
