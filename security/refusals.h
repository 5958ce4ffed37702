// Refused control-plane calls (issue #20, item 5): counted by reason for the coordinator's
// /metrics, and logged as WARNINGs that a caller cannot turn into a flood. A peer sending
// thousands of calls with a wrong token, or streams for nodes it did not register, gets at most
// `burst` lines per reason per `window` for its host (the peer's address without the port, since
// every new connection has a new port); the rest are counted, and the next line written for that
// reason and host says how many were left out (common/warning_limiter.h). The counters count
// every refusal, logged or not.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/warning_limiter.h"

namespace ringmaster::security {

// Why a call was refused: a fixed set, so the metric's series stay bounded.
enum class Refusal {
  kMissingToken,   // no authorization metadata where a token is required
  kWrongToken,     // a token that is not the one the call needs (or not "Bearer <token>")
  kNodeSecret,     // a Heartbeat stream without its registration's node secret, or a wrong one
  kStreamInUse,    // a second Heartbeat stream for a node that has one
  kRegistration,   // a Register refused: a name held by a connected agent, a bad name or field
  kResourceLimit,  // over a per-peer limit: Register rate, open streams (coordinator/service)
};
inline constexpr Refusal kRefusals[] = {Refusal::kMissingToken, Refusal::kWrongToken,
                                        Refusal::kNodeSecret,   Refusal::kStreamInUse,
                                        Refusal::kRegistration, Refusal::kResourceLimit};

// The metric label: "missing_token", "wrong_token", "node_secret", "stream_in_use",
// "registration", "resource_limit".
std::string_view RefusalName(Refusal reason);

// "ipv4:10.0.0.7" for gRPC's peer "ipv4:10.0.0.7:51234", "ipv6:[::1]" for "ipv6:[::1]:443";
// a peer without a port (unix sockets) is returned whole.
std::string PeerHost(std::string_view peer);

class Refusals {
 public:
  // Lines per reason and peer host per window, and how many hosts are told apart before the
  // rest share one budget (WarningLimiter's max_keys).
  static constexpr int kBurst = 5;
  static constexpr size_t kMaxPeers = 1024;

  explicit Refusals(absl::Duration window = absl::Minutes(1), int burst = kBurst,
                    size_t max_peers = kMaxPeers)
      : limiter_(window, burst, max_peers) {}

  // Counts a refusal of `reason` from `peer` (gRPC's ServerContext::peer()) and logs `line` as
  // a WARNING unless that reason and host have spent their lines for the window. Thread-safe.
  void Refuse(Refusal reason, std::string_view peer, std::string_view line);

  // Refuse at `now`, returning the line to log ("" when left out) instead of logging it.
  std::string Admit(Refusal reason, std::string_view peer, std::string_view line,
                    absl::Time now = absl::Now());

  // Refusals of `reason` so far, logged or not.
  uint64_t count(Refusal reason) const {
    return counts_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<uint64_t>, std::size(kRefusals)> counts_{};
  WarningLimiter limiter_;
};

// The coordinator process's refusals: what its services count and its /metrics page shows.
Refusals& ProcessRefusals();

}  // namespace ringmaster::security
