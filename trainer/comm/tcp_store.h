// A rendezvous Store over TCP, for ranks started by hand or by torchrun-style launchers: one
// process (rank 0) hosts the server on MASTER_ADDR:MASTER_PORT and every rank, the host
// included, talks to it as a client.
//
// Wire protocol (all integers big-endian; a connection carries one request at a time):
//   request  = op:u8, then
//     kSet  (1): key_len:u32 key value_len:u32 value
//     kGet  (2): timeout_ms:u64 key_len:u32 key
//     kWait (3): timeout_ms:u64 n_keys:u32 { key_len:u32 key } * n_keys
//     kHello (4): session_len:u32 session      (every client sends it first)
//   response = status:u8 (0 = ok, 1 = timed out, 2 = another session: the server closes), then
//     Get ok: value_len:u32 value        Wait timed out: n_missing:u32 { index:u32 } * n_missing
// Keys are at most kMaxKeyBytes, values at most kMaxValueBytes, a Wait names at most
// kMaxWaitKeys keys. The server treats its input as untrusted: anything malformed or oversized
// closes that one connection with a warning naming the peer; values are only ever stored and
// returned. Get and Wait block on the server until the key(s) exist or the timeout sent with the
// request passes.
//
// Sessions: a server and its clients name a session (a job and its generation). A client that
// reaches a server of another session -- the previous generation's rank 0, still stopping on the
// same port -- is turned away and keeps retrying until its connect timeout, so a restarted job
// never talks to a stale server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/comm/store.h"

namespace ringmaster::trainer {

class TcpStoreServer;

// Thread-safe: calls from several threads are serialized over the one connection, so a Get
// blocking on the server holds up other calls through the same TcpStore until it returns. Use
// one TcpStore per thread when one thread waits for a key another thread sets.
//
// After an I/O failure the connection is in an unknown state; every later call fails with
// Unavailable naming host:port (a TcpStore never reconnects).
class TcpStore : public Store {
 public:
  static constexpr size_t kMaxKeyBytes = 4 << 10;
  static constexpr size_t kMaxValueBytes = 16 << 20;
  static constexpr size_t kMaxWaitKeys = 4096;

  // With `is_server`, binds `host`:`port` (port 0 picks a free one; "" binds every interface),
  // serves in background threads until destruction, and connects this store's own client to
  // it; a port in use is retried with bounded backoff until `connect_timeout` (AlreadyExists
  // naming host:port when it stays in use). Otherwise connects to a server at `host`:`port`,
  // retrying with bounded backoff until `connect_timeout` (DeadlineExceeded naming host:port when
  // none appears) for a server of the same `session`.
  static absl::StatusOr<std::unique_ptr<TcpStore>> Create(const std::string& host, int port,
                                                          bool is_server,
                                                          absl::Duration connect_timeout,
                                                          const std::string& session = "");
  ~TcpStore() override;

  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  // The port the server listens on (the real one when created with port 0).
  int port() const { return port_; }
  bool is_server() const { return server_ != nullptr; }

  // Server only, for tests: waits until `n` Get/Wait requests are parked on the server waiting
  // for keys. False when that does not happen within `timeout` (or this is not the server).
  bool WaitForBlockedRequestsForTest(int n, absl::Duration timeout);

 private:
  TcpStore(std::string host, int port, int fd, std::unique_ptr<TcpStoreServer> server);

  // Sends `request` and reads the response status byte, with the whole exchange bounded by
  // `reply_within` beyond the request's own timeout. Caller holds mu_.
  absl::StatusOr<uint8_t> Exchange(const std::string& request, absl::Duration reply_within);
  // Reads exactly `n` bytes of the current response. Caller holds mu_.
  absl::Status ReadReply(void* buf, size_t n, absl::Time deadline);
  // Marks the connection broken and returns Unavailable naming host:port and `what`.
  absl::Status Broken(const std::string& what);
  std::string Where() const;

  const std::string host_;
  const int port_;
  std::unique_ptr<TcpStoreServer> server_;  // Set when this store hosts the server.

  std::mutex mu_;       // Serializes requests on fd_.
  int fd_ = -1;         // Guarded by mu_; -1 once broken.
  std::string broken_;  // Guarded by mu_: why fd_ was dropped.
};

}  // namespace ringmaster::trainer
