// The TcpStore wire protocol's pieces shared by its client (tcp_store.cc) and server
// (tcp_store_server.cc): request and reply codes, big-endian integers, timeouts, and the socket
// helpers both sides use. The protocol itself is described in tcp_store.h. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::trainer::tcp_store_wire {

enum Op : uint8_t { kSet = 1, kGet = 2, kWait = 3, kHello = 4 };
enum Reply : uint8_t { kOk = 0, kTimedOut = 1, kOtherSession = 2 };

// Longest wait a request may ask for; longer (or infinite) timeouts are clamped to it so that
// deadline arithmetic cannot overflow.
constexpr uint64_t kMaxTimeoutMs = uint64_t{365} * 24 * 3600 * 1000;

// "host:port", with an IPv6 host in brackets.
std::string HostPort(const std::string& host, int port);
// "'a', 'b'" for error messages.
std::string Quoted(const std::vector<std::string>& keys);
void PutU32(std::string* out, uint32_t v);
void PutU64(std::string* out, uint64_t v);
uint64_t GetBigEndian(const unsigned char* p, int n);
// A request's timeout in whole milliseconds (rounded up), clamped to [0, kMaxTimeoutMs].
uint64_t TimeoutMs(absl::Duration timeout);
// poll()'s timeout argument for the time left until `deadline` (-1 = forever).
int PollMs(absl::Time deadline);
std::string Errno(int err);
// Writes all of `data`; false (errno set) when the peer is gone. MSG_NOSIGNAL: a closed peer
// must be an error, not a SIGPIPE.
bool SendAll(int fd, const char* data, size_t n);
// The peer's "address:port" of a connected socket, or "unknown peer".
std::string PeerName(int fd);
// "[::1]" -> "::1": hosts may be written the way they appear in a URL.
std::string StripBrackets(const std::string& host);

}  // namespace ringmaster::trainer::tcp_store_wire
