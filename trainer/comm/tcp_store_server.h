// The TcpStore server: a listening thread that accepts, plus one thread per connection;
// blocking Get/Wait park on a condition variable. Clients of another session are turned away.
// Used by TcpStore (tcp_store.h), which hosts one on rank 0. Internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster::trainer {

// Start binds host:port (port 0: a free one; "" every interface). AlreadyExists when the port
// is in use (TcpStore::Create retries it), Unavailable or InvalidArgument otherwise.
class TcpStoreServer {
 public:
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               std::string session);
  ~TcpStoreServer();

  int port() const { return port_; }
  bool WaitForBlocked(int n, absl::Duration timeout);

 private:
  struct Conn {
    int fd = -1;
    std::string peer;
    std::thread thread;
    bool done = false;  // Guarded by conns_mu_.
  };
  enum class ReadResult { kOk, kEof, kError };

  TcpStoreServer(std::string where, std::string session, int listen_fd, int port, int wake_r,
                 int wake_w)
      : where_(std::move(where)),
        session_(std::move(session)),
        listen_fd_(listen_fd),
        port_(port),
        wake_r_(wake_r),
        wake_w_(wake_w) {}

  void AcceptLoop();
  void Serve(Conn* conn);
  // Handles one request. False when the connection must close; `*why` is then non-empty for a
  // protocol violation worth a warning.
  bool HandleRequest(int fd, std::string* why);
  // Blocks until every key is present or `timeout_ms` passes. Returns the indices of missing
  // keys, or nullopt when the server is stopping.
  std::optional<std::vector<uint32_t>> AwaitKeys(const std::vector<std::string>& keys,
                                                 uint64_t timeout_ms);
  static ReadResult ReadExact(int fd, void* buf, size_t n);
  // Reads a u32 length and that many bytes, refusing lengths over `max`.
  static bool ReadBytes(int fd, size_t max, const char* what, std::string* out, std::string* why);

  const std::string where_;
  const std::string session_;  // clients of another session are turned away (kHello)
  const int listen_fd_;
  const int port_;
  const int wake_r_, wake_w_;  // Self-pipe that stops the accept loop.
  std::thread accept_thread_;

  std::mutex conns_mu_;
  std::list<std::unique_ptr<Conn>> conns_;  // Only the accept thread adds or removes.

  std::mutex data_mu_;
  std::condition_variable data_cv_;  // Signalled on every Set, stop, and change of blocked_.
  absl::flat_hash_map<std::string, std::string> data_;  // Guarded by data_mu_.
  bool stopping_ = false;                               // Guarded by data_mu_.
  int blocked_ = 0;  // Requests parked in AwaitKeys; guarded by data_mu_.
};

}  // namespace ringmaster::trainer
