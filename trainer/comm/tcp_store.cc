// TcpStore: the client side (see tcp_store.h for the wire protocol); rank 0's store also hosts
// the server (tcp_store_server.h).
#include "trainer/comm/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "trainer/comm/tcp_store_server.h"
#include "trainer/comm/tcp_store_wire.h"

namespace ringmaster::trainer {
namespace {

using tcp_store_wire::Errno;
using tcp_store_wire::GetBigEndian;
using tcp_store_wire::HostPort;
using tcp_store_wire::kGet;
using tcp_store_wire::kHello;
using tcp_store_wire::kOk;
using tcp_store_wire::kOtherSession;
using tcp_store_wire::kSet;
using tcp_store_wire::kTimedOut;
using tcp_store_wire::kWait;
using tcp_store_wire::PollMs;
using tcp_store_wire::PutU32;
using tcp_store_wire::PutU64;
using tcp_store_wire::Quoted;
using tcp_store_wire::SendAll;
using tcp_store_wire::StripBrackets;
using tcp_store_wire::TimeoutMs;

// How long a client waits for a reply beyond the timeout its request carries: covers a slow
// network, but turns a server that is alive yet stuck into an error rather than a hang.
constexpr absl::Duration kReplySlack = absl::Seconds(30);
constexpr absl::Duration kMinRetry = absl::Milliseconds(10);
constexpr absl::Duration kMaxRetry = absl::Milliseconds(500);

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
