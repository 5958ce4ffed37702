#include "trainer/comm/tcp_store_server.h"

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
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "trainer/comm/tcp_store.h"
#include "trainer/comm/tcp_store_wire.h"

namespace ringmaster::trainer {
namespace {

using tcp_store_wire::Errno;
using tcp_store_wire::GetBigEndian;
using tcp_store_wire::HostPort;
using tcp_store_wire::kGet;
using tcp_store_wire::kHello;
using tcp_store_wire::kMaxTimeoutMs;
using tcp_store_wire::kOk;
using tcp_store_wire::kOtherSession;
using tcp_store_wire::kSet;
using tcp_store_wire::kTimedOut;
using tcp_store_wire::kWait;
using tcp_store_wire::PeerName;
using tcp_store_wire::PutU32;
using tcp_store_wire::SendAll;

// Concurrent connections the server accepts (each holds a thread).
constexpr size_t kMaxConnections = 1024;

}  // namespace

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

}  // namespace ringmaster::trainer
