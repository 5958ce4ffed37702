// TcpStore: the client side, and the server it talks to (a listening thread that accepts, plus
// one thread per connection; blocking Get/Wait park on a condition variable). See tcp_store.h
// for the wire protocol.
#include "trainer/comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <list>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace ringmaster::trainer {
namespace {

enum Op : uint8_t { kSet = 1, kGet = 2, kWait = 3, kHello = 4 };
enum Reply : uint8_t { kOk = 0, kTimedOut = 1, kOtherSession = 2 };

// Longest wait a request may ask for; longer (or infinite) timeouts are clamped to it so that
// deadline arithmetic cannot overflow.
constexpr uint64_t kMaxTimeoutMs = uint64_t{365} * 24 * 3600 * 1000;
// How long a client waits for a reply beyond the timeout its request carries: covers a slow
// network, but turns a server that is alive yet stuck into an error rather than a hang.
constexpr absl::Duration kReplySlack = absl::Seconds(30);
// Concurrent connections the server accepts (each holds a thread).
constexpr size_t kMaxConnections = 1024;
constexpr absl::Duration kMinRetry = absl::Milliseconds(10);
constexpr absl::Duration kMaxRetry = absl::Milliseconds(500);

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string Quoted(const std::vector<std::string>& keys) {
  return absl::StrJoin(keys, ", ", [](std::string* out, const std::string& k) {
    absl::StrAppend(out, "'", k, "'");
  });
}

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void PutU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t GetBigEndian(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

uint64_t TimeoutMs(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) return 0;
  if (timeout >= absl::Milliseconds(kMaxTimeoutMs)) return kMaxTimeoutMs;
  return static_cast<uint64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
}

// poll()'s timeout argument for the time left until `deadline` (-1 = forever).
int PollMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(
      INT_MAX, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)))));
}

std::string Errno(int err) { return std::strerror(err); }

// Writes all of `data`; false (errno set) when the peer is gone. MSG_NOSIGNAL: a closed peer
// must be an error, not a SIGPIPE.
bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(fd, data, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

std::string PeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown peer";
  char ip[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    return HostPort(ip, ntohs(a->sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
    return HostPort(ip, ntohs(a->sin6_port));
  }
  return "unknown peer";
}

// "[::1]" -> "::1": hosts may be written the way they appear in a URL.
std::string StripBrackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// One non-blocking connect attempt to one address, bounded by `deadline`. Returns a blocking
// socket, or -1 with `*error` describing the failure.
int ConnectOnce(const addrinfo& ai, absl::Time deadline, std::string* error) {
  int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) {
    *error = absl::StrCat("socket: ", Errno(errno));
    return -1;
  }
  int rc = ::connect(fd, ai.ai_addr, ai.ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    do {
      rc = ::poll(&p, 1, std::max(PollMs(deadline), 1));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      *error = "connect timed out";
      ::close(fd);
      return -1;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (rc < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    rc = err == 0 ? 0 : -1;
    errno = err;
  }
  if (rc != 0) {
    *error = Errno(errno);
    ::close(fd);
    return -1;
  }
  // Connecting to a free local port in the ephemeral range can pick that same port as the
  // source and "succeed" by connecting to itself; that socket would echo our own requests back.
  sockaddr_storage self{}, peer{};
  socklen_t self_len = sizeof(self), peer_len = sizeof(peer);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0) {
    *error = "connected to itself (no server listening)";
    ::close(fd);
    return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Connects to host:port, retrying (the server may start after its clients) with bounded
// exponential backoff until `timeout` has passed.
// `handshake` runs on every new connection: Unavailable means "not our server (yet)": the
// connection is closed and the retries go on; any other error ends them.
absl::StatusOr<int> ConnectWithRetry(const std::string& host, int port, absl::Duration timeout,
                                     const std::function<absl::Status(int fd)>& handshake) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string port_str = std::to_string(port);
  absl::Duration backoff = kMinRetry;
  std::string last_error = "no attempt made";
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int gai = ::getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res);
    if (gai != 0) {
      // Retried: a launcher's master name may resolve only once its host is up.
      last_error = absl::StrCat("cannot resolve: ", ::gai_strerror(gai));
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        int fd = ConnectOnce(*ai, deadline, &last_error);
        if (fd < 0) continue;
        absl::Status hs = handshake(fd);
        if (hs.ok()) {
          ::freeaddrinfo(res);
          return fd;
        }
        ::close(fd);
        if (!absl::IsUnavailable(hs)) {
          ::freeaddrinfo(res);
          return hs;
        }
        last_error = std::string(hs.message());
      }
      ::freeaddrinfo(res);
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("TcpStore: no server at ", HostPort(host, port), " within ",
                       absl::FormatDuration(timeout), " (last error: ", last_error, ")"));
    }
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxRetry);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Server

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

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host,
                                                                      int port,
                                                                      std::string session) {
  const std::string where = HostPort(host.empty() ? "*" : host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port_str = std::to_string(port);
  int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpStore server: cannot resolve ", where, ": ", ::gai_strerror(gai)));
  }
  int fd = -1;
  std::string last_error = "no address";
  bool in_use = false;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = absl::StrCat("socket: ", Errno(errno));
      continue;
    }
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) {  // Dual-stack when binding the IPv6 wildcard.
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      in_use = in_use || errno == EADDRINUSE;
      last_error = Errno(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return absl::Status(
        in_use ? absl::StatusCode::kAlreadyExists : absl::StatusCode::kUnavailable,
        absl::StrCat("TcpStore server: cannot listen on ", where, ": ", last_error));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int real_port = addr.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    absl::Status s = absl::InternalError(absl::StrCat("TcpStore server: pipe: ", Errno(errno)));
    ::close(fd);
    return s;
  }
  std::unique_ptr<TcpStoreServer> server(
      new TcpStoreServer(HostPort(host.empty() ? "*" : host, real_port), std::move(session), fd,
                         real_port, wake[0], wake[1]));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  char byte = 0;
  while (::write(wake_w_, &byte, 1) < 0 && errno == EINTR) {
  }
  accept_thread_.join();
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    stopping_ = true;
  }
  data_cv_.notify_all();
  {
    // Wakes threads blocked in recv(); each fd stays open (so its number cannot be reused
    // under us) until its thread is joined.
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& c : conns_) ::shutdown(c->fd, SHUT_RDWR);
  }
  for (auto& c : conns_) {
    c->thread.join();
    ::close(c->fd);
  }
  ::close(listen_fd_);
  ::close(wake_r_);
  ::close(wake_w_);
}

bool TcpStoreServer::WaitForBlocked(int n, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(data_mu_);
  return data_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return blocked_ >= n; });
}

void TcpStoreServer::AcceptLoop() {
  while (true) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_r_, POLLIN, 0}};
    int rc = ::poll(p, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || p[1].revents != 0) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      LogWarning(absl::StrCat("TcpStore server ", where_, ": accept: ", Errno(errno)));
      // Out of descriptors or similar: back off (waking early on stop) instead of spinning.
      pollfd w{wake_r_, POLLIN, 0};
      if (::poll(&w, 1, 100) > 0) return;
      continue;
    }
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {  // Reap finished connections.
      if ((*it)->done) {
        (*it)->thread.join();
        ::close((*it)->fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conn->peer = PeerName(fd);
    if (conns_.size() >= kMaxConnections) {
      LogWarning(absl::StrCat("TcpStore server ", where_, ": refusing connection from ", conn->peer,
                              ": ", kMaxConnections, " connections already open"));
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn* c = conn.get();
    conns_.push_back(std::move(conn));
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void TcpStoreServer::Serve(Conn* conn) {
  std::string why;
  while (HandleRequest(conn->fd, &why)) {
  }
  if (!why.empty()) {
    LogWarning(absl::StrCat("TcpStore server ", where_, ": closing connection from ", conn->peer,
                            ": ", why));
  }
  ::shutdown(conn->fd, SHUT_RDWR);  // The fd itself is closed by whoever joins this thread.
  std::lock_guard<std::mutex> lock(conns_mu_);
  conn->done = true;
}

TcpStoreServer::ReadResult TcpStoreServer::ReadExact(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, 0);
    if (got == 0) return ReadResult::kEof;
    if (got < 0) {
      if (errno == EINTR) continue;
      return ReadResult::kError;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return ReadResult::kOk;
}

bool TcpStoreServer::ReadBytes(int fd, size_t max, const char* what, std::string* out,
                               std::string* why) {
  unsigned char len_buf[4];
  if (ReadExact(fd, len_buf, 4) != ReadResult::kOk) {
    *why = "truncated request";
    return false;
  }
  const uint64_t len = GetBigEndian(len_buf, 4);
  if (len > max) {
    *why = absl::StrCat(what, " of ", len, " bytes exceeds the limit of ", max);
    return false;
  }
  out->resize(len);
  if (ReadExact(fd, out->data(), len) != ReadResult::kOk) {
    *why = "truncated request";
    return false;
  }
  return true;
}

std::optional<std::vector<uint32_t>> TcpStoreServer::AwaitKeys(const std::vector<std::string>& keys,
                                                               uint64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(std::min(timeout_ms, kMaxTimeoutMs));
  std::unique_lock<std::mutex> lock(data_mu_);
  auto all_present = [&] {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return data_.contains(k); });
  };
  if (!all_present()) {
    ++blocked_;
    data_cv_.notify_all();
    data_cv_.wait_until(lock, deadline, [&] { return stopping_ || all_present(); });
    --blocked_;
    data_cv_.notify_all();
  }
  if (stopping_) return std::nullopt;
  std::vector<uint32_t> missing;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!data_.contains(keys[i])) missing.push_back(static_cast<uint32_t>(i));
  }
  return missing;
}

bool TcpStoreServer::HandleRequest(int fd, std::string* why) {
  uint8_t op;
  switch (ReadExact(fd, &op, 1)) {
    case ReadResult::kOk:
      break;
    case ReadResult::kEof:
      return false;  // Clean close between requests.
    case ReadResult::kError:
      *why = absl::StrCat("read: ", Errno(errno));
      return false;
  }
  auto read_timeout = [&](uint64_t* ms) {
    unsigned char buf[8];
    if (ReadExact(fd, buf, 8) != ReadResult::kOk) {
      *why = "truncated request";
      return false;
    }
    *ms = GetBigEndian(buf, 8);
    return true;
  };
  std::string reply;
  switch (op) {
    case kSet: {
      std::string key, value;
      if (!ReadBytes(fd, TcpStore::kMaxKeyBytes, "key", &key, why) ||
          !ReadBytes(fd, TcpStore::kMaxValueBytes, "value", &value, why)) {
        return false;
      }
      {
        std::lock_guard<std::mutex> lock(data_mu_);
        data_[std::move(key)] = std::move(value);
      }
      data_cv_.notify_all();
      reply.push_back(static_cast<char>(kOk));
      break;
    }
    case kGet: {
      uint64_t ms;
      std::string key;
      if (!read_timeout(&ms) || !ReadBytes(fd, TcpStore::kMaxKeyBytes, "key", &key, why)) {
        return false;
      }
      std::optional<std::vector<uint32_t>> missing = AwaitKeys({key}, ms);
      if (!missing.has_value()) return false;
      if (!missing->empty()) {
        reply.push_back(static_cast<char>(kTimedOut));
        break;
      }
      reply.push_back(static_cast<char>(kOk));
      std::lock_guard<std::mutex> lock(data_mu_);
      const std::string& value = data_.at(key);
      PutU32(&reply, static_cast<uint32_t>(value.size()));
      reply += value;
      break;
    }
    case kWait: {
      uint64_t ms;
      unsigned char n_buf[4];
      if (!read_timeout(&ms)) return false;
      if (ReadExact(fd, n_buf, 4) != ReadResult::kOk) {
        *why = "truncated request";
        return false;
      }
      const uint64_t n = GetBigEndian(n_buf, 4);
      if (n > TcpStore::kMaxWaitKeys) {
        *why = absl::StrCat("wait for ", n, " keys exceeds the limit of ", TcpStore::kMaxWaitKeys);
        return false;
      }
      std::vector<std::string> keys(n);
      for (std::string& k : keys) {
        if (!ReadBytes(fd, TcpStore::kMaxKeyBytes, "key", &k, why)) return false;
      }
      std::optional<std::vector<uint32_t>> missing = AwaitKeys(keys, ms);
      if (!missing.has_value()) return false;
      reply.push_back(static_cast<char>(missing->empty() ? kOk : kTimedOut));
      if (!missing->empty()) {
        PutU32(&reply, static_cast<uint32_t>(missing->size()));
        for (uint32_t i : *missing) PutU32(&reply, i);
      }
      break;
    }
    case kHello: {
      std::string session;
      if (!ReadBytes(fd, TcpStore::kMaxKeyBytes, "session", &session, why)) return false;
      if (session != session_) {
        // A client of another job or generation (this server outlived its generation, or the
        // new one's server is not up yet): it retries until the right server answers.
        const char r = static_cast<char>(kOtherSession);
        SendAll(fd, &r, 1);
        return false;
      }
      reply.push_back(static_cast<char>(kOk));
      break;
    }
    default:
      *why = absl::StrCat("unknown request type ", static_cast<int>(op));
      return false;
  }
  return SendAll(fd, reply.data(), reply.size());  // A failure means the client left.
}

// ---------------------------------------------------------------------------------------------
// Client

TcpStore::TcpStore(std::string host, int port, int fd, std::unique_ptr<TcpStoreServer> server)
    : host_(std::move(host)), port_(port), server_(std::move(server)), fd_(fd) {}

TcpStore::~TcpStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  server_.reset();  // Joins the server's threads.
}

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Create(const std::string& host, int port,
                                                           bool is_server,
                                                           absl::Duration connect_timeout,
                                                           const std::string& session) {
  if (session.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpStore: session name of ", session.size(), " bytes is too long"));
  }
  if (port < (is_server ? 0 : 1) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpStore: port ", port, " is out of range for ", HostPort(host, port)));
  }
  std::string h = StripBrackets(host);
  std::unique_ptr<TcpStoreServer> server;
  std::string connect_host = h;
  if (is_server) {
    // A port in use is often about to be freed: the previous generation's rank 0, still
    // checkpointing after SIGTERM, holds MASTER_PORT while the next one starts (its agent was
    // restarted and does not know the old process). Retry until connect_timeout.
    const absl::Time deadline = absl::Now() + connect_timeout;
    absl::Duration backoff = absl::Milliseconds(50);
    auto started = TcpStoreServer::Start(h, port, session);
    bool waited = false;
    while (absl::IsAlreadyExists(started.status()) && absl::Now() + backoff < deadline) {
      if (!waited) {
        LogWarning(absl::StrCat(started.status().message(), "; retrying for up to ",
                                absl::FormatDuration(connect_timeout)));
        waited = true;
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(1));
      started = TcpStoreServer::Start(h, port, session);
    }
    if (!started.ok()) {
      if (!waited) return started.status();
      return absl::Status(started.status().code(),
                          absl::StrCat(started.status().message(), " (still, after waiting ",
                                       absl::FormatDuration(connect_timeout), ")"));
    }
    server = std::move(*started);
    port = server->port();
    // A wildcard bind is reached through loopback from this process.
    if (h.empty() || h == "0.0.0.0") connect_host = "127.0.0.1";
    if (h == "::") connect_host = "::1";
  } else if (h.empty()) {
    return absl::InvalidArgumentError("TcpStore: empty server host");
  }
  std::string hello(1, static_cast<char>(kHello));
  PutU32(&hello, static_cast<uint32_t>(session.size()));
  hello += session;
  auto handshake = [&](int fd) -> absl::Status {
    if (!SendAll(fd, hello.data(), hello.size())) {
      return absl::UnavailableError(absl::StrCat("hello: ", Errno(errno)));
    }
    pollfd pfd{fd, POLLIN, 0};
    int rc;
    while ((rc = ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(kReplySlack)))) < 0 &&
           errno == EINTR) {
    }
    uint8_t reply = 0xff;
    if (rc <= 0 || ::recv(fd, &reply, 1, 0) != 1) {
      return absl::UnavailableError("the server closed the connection at hello");
    }
    if (reply == kOtherSession) {
      return absl::UnavailableError(
          absl::StrCat("the server there belongs to another session than '", session,
                       "' (a previous generation still running?)"));
    }
    if (reply != kOk) {
      return absl::UnavailableError(
          absl::StrCat("malformed reply to hello (", static_cast<int>(reply), ")"));
    }
    return absl::OkStatus();
  };
  auto fd = ConnectWithRetry(connect_host, port, connect_timeout, handshake);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<TcpStore>(new TcpStore(connect_host, port, *fd, std::move(server)));
}

bool TcpStore::WaitForBlockedRequestsForTest(int n, absl::Duration timeout) {
  return server_ != nullptr && server_->WaitForBlocked(n, timeout);
}

std::string TcpStore::Where() const { return HostPort(host_, port_); }

absl::Status TcpStore::Broken(const std::string& what) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  broken_ = what;
  return absl::UnavailableError(absl::StrCat("TcpStore ", Where(), ": ", what));
}

absl::Status TcpStore::ReadReply(void* buf, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, PollMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Broken(absl::StrCat("poll: ", Errno(errno)));
    if (rc == 0) return Broken("server stopped replying");
    ssize_t got = ::recv(fd_, p, n, 0);
    if (got == 0) return Broken("connection closed by the server");
    if (got < 0) {
      if (errno == EINTR) continue;
      return Broken(absl::StrCat("connection lost: ", Errno(errno)));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint8_t> TcpStore::Exchange(const std::string& request,
                                           absl::Duration reply_within) {
  if (fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("TcpStore ", Where(), ": connection lost earlier (", broken_, ")"));
  }
  if (!SendAll(fd_, request.data(), request.size())) {
    return Broken(absl::StrCat("connection lost: ", Errno(errno)));
  }
  uint8_t status;
  absl::Status s = ReadReply(&status, 1, absl::Now() + reply_within);
  if (!s.ok()) return s;
  if (status != kOk && status != kTimedOut) {
    return Broken(absl::StrCat("malformed reply (status ", static_cast<int>(status), ")"));
  }
  return status;
}

absl::Status TcpStore::Set(const std::string& key, const std::string& value) {
  if (key.size() > kMaxKeyBytes || value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TcpStore ", Where(), ": key '", key.substr(0, 64), "' (", key.size(), " bytes) or value (",
        value.size(), " bytes) over the limits of ", kMaxKeyBytes, " and ", kMaxValueBytes));
  }
  std::string req(1, static_cast<char>(kSet));
  PutU32(&req, static_cast<uint32_t>(key.size()));
  req += key;
  PutU32(&req, static_cast<uint32_t>(value.size()));
  req += value;
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<uint8_t> status = Exchange(req, kReplySlack);
  if (!status.ok()) return status.status();
  if (*status != kOk) return Broken("malformed reply to a set");
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key, absl::Duration timeout) {
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("TcpStore ", Where(), ": key of ", key.size(),
                                                   " bytes over the limit of ", kMaxKeyBytes));
  }
  std::string req(1, static_cast<char>(kGet));
  PutU64(&req, TimeoutMs(timeout));
  PutU32(&req, static_cast<uint32_t>(key.size()));
  req += key;
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<uint8_t> status =
      Exchange(req, std::max(timeout, absl::ZeroDuration()) + kReplySlack);
  if (!status.ok()) return status.status();
  if (*status == kTimedOut) {
    return absl::DeadlineExceededError(absl::StrCat(
        "TcpStore ", Where(), ": key '", key, "' not set within ", absl::FormatDuration(timeout)));
  }
  const absl::Time deadline = absl::Now() + kReplySlack;
  unsigned char len_buf[4];
  absl::Status s = ReadReply(len_buf, 4, deadline);
  if (!s.ok()) return s;
  const uint64_t len = GetBigEndian(len_buf, 4);
  if (len > kMaxValueBytes)
    return Broken(absl::StrCat("malformed reply (value of ", len, " bytes)"));
  std::string value(len, '\0');
  s = ReadReply(value.data(), len, deadline);
  if (!s.ok()) return s;
  return value;
}

absl::Status TcpStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  if (keys.empty()) return absl::OkStatus();
  if (keys.size() > kMaxWaitKeys) {
    return absl::InvalidArgumentError(absl::StrCat("TcpStore ", Where(), ": wait for ", keys.size(),
                                                   " keys over the limit of ", kMaxWaitKeys));
  }
  std::string req(1, static_cast<char>(kWait));
  PutU64(&req, TimeoutMs(timeout));
  PutU32(&req, static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) {
    if (k.size() > kMaxKeyBytes) {
      return absl::InvalidArgumentError(absl::StrCat("TcpStore ", Where(), ": key of ", k.size(),
                                                     " bytes over the limit of ", kMaxKeyBytes));
    }
    PutU32(&req, static_cast<uint32_t>(k.size()));
    req += k;
  }
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<uint8_t> status =
      Exchange(req, std::max(timeout, absl::ZeroDuration()) + kReplySlack);
  if (!status.ok()) return status.status();
  if (*status == kOk) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + kReplySlack;
  unsigned char buf[4];
  absl::Status s = ReadReply(buf, 4, deadline);
  if (!s.ok()) return s;
  const uint64_t n = GetBigEndian(buf, 4);
  if (n == 0 || n > keys.size()) return Broken("malformed reply to a wait");
  std::vector<std::string> missing;
  for (uint64_t i = 0; i < n; ++i) {
    s = ReadReply(buf, 4, deadline);
    if (!s.ok()) return s;
    const uint64_t index = GetBigEndian(buf, 4);
    if (index >= keys.size()) return Broken("malformed reply to a wait");
    missing.push_back(keys[index]);
  }
  return absl::DeadlineExceededError(absl::StrCat("TcpStore ", Where(), ": keys ", Quoted(missing),
                                                  " not set within ",
                                                  absl::FormatDuration(timeout)));
}

}  // namespace ringmaster::trainer
