// A process with more static TLS than civetweb's 100 KiB worker stacks still serves /metrics
// when it links thread_stacks.cc (see thread_stacks.h): without it, glibc cannot fit the TLS into
// the stacks civetweb asks for and no request is answered. The 256 KiB thread_local array below
// stands in for cuBLASLt's and OpenBLAS's TLS in a CUDA build of the trainer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "common/metrics_server.h"
#include "common/thread_stacks.h"

#ifdef RINGMASTER_HAVE_PROMETHEUS
#include <prometheus/counter.h>
#include <prometheus/registry.h>

// External linkage and used: the compiler must keep all of it in the executable's TLS segment.
constexpr size_t kTlsBytes = 256 * 1024;
[[gnu::used]] thread_local char ringmaster_check_big_tls[kTlsBytes];

namespace ringmaster {
namespace {

// GET http://127.0.0.1:port/metrics with a 20 s timeout; the whole response, or "" on failure.
std::string Get(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

TEST(ThreadStacksTest, ServesMetricsWithMoreStaticTlsThanCivetwebsStacks) {
  volatile char* tls = ringmaster_check_big_tls;
  tls[kTlsBytes - 1] = 1;  // this thread's copy exists
  EXPECT_GE(StaticTlsBytes(), kTlsBytes);
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("stacks_check_requests_total")
      .Help("h")
      .Register(*registry)
      .Add({})
      .Increment();
  absl::StatusOr<std::unique_ptr<trainer::MetricsServer>> server =
      trainer::ServeCollectable("127.0.0.1:0", registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string page = Get((*server)->port());
  EXPECT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("stacks_check_requests_total 1"), std::string::npos) << page;
}

}  // namespace
}  // namespace ringmaster
#else
TEST(ThreadStacksTest, NeedsPrometheusCpp) { GTEST_SKIP() << "built without prometheus-cpp"; }
#endif
