// TcpStore over loopback: a server plus clients in one process, blocking Get/Wait (ordered with
// the server's count of parked requests, not sleeps), timeouts, hostile bytes from a raw socket,
// a missing or vanished server, and a real Gloo rendezvous through it.
#include "trainer/comm/tcp_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/gloo_communicator.h"

namespace ringmaster::trainer {
namespace {

constexpr absl::Duration kLong = absl::Seconds(10);  // Generous bound for what must happen.

std::unique_ptr<TcpStore> MakeServer() {
  auto s = TcpStore::Create("127.0.0.1", 0, /*is_server=*/true, kLong);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<TcpStore> MakeClient(int port) {
  auto s = TcpStore::Create("127.0.0.1", port, /*is_server=*/false, kLong);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// A plain TCP connection to 127.0.0.1:port, for sending bytes no TcpStore would.
int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the peer closes `fd` within `timeout` (reads and discards anything before that).
bool PeerClosesWithin(int fd, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    char buf[256];
    ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET)) return true;
    if (got < 0) return false;
  }
}

// A port nothing listens on: bound, read, then released.
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string U32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
}

TEST(TcpStoreTest, SetAndGetAcrossClients) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->is_server());
  EXPECT_GT(server->port(), 0);
  auto a = MakeClient(server->port());
  auto b = MakeClient(server->port());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(a->is_server());

  ASSERT_TRUE(a->Set("x", "1").ok());
  ASSERT_TRUE(b->Set("bin", std::string("b\0n\xff", 4)).ok());
  EXPECT_EQ(b->Get("x", kLong).value_or("?"), "1");
  EXPECT_EQ(server->Get("x", kLong).value_or("?"), "1");
  EXPECT_EQ(a->Get("bin", kLong).value_or("?"), std::string("b\0n\xff", 4));

  ASSERT_TRUE(server->Set("x", "2").ok());  // Overwrite.
  EXPECT_EQ(a->Get("x", kLong).value_or("?"), "2");

  ASSERT_TRUE(a->Set("", "").ok());  // Empty key and value are ordinary.
  EXPECT_EQ(b->Get("", kLong).value_or("?"), "");

  const std::string big(1 << 20, 'v');
  ASSERT_TRUE(a->Set("big", big).ok());
  EXPECT_EQ(b->Get("big", kLong).value_or("?"), big);

  EXPECT_TRUE(b->Wait({}, absl::ZeroDuration()).ok());
  EXPECT_TRUE(b->Wait({"x", "bin", "big"}, absl::ZeroDuration()).ok());
}

TEST(TcpStoreTest, GetBlocksUntilAnotherClientSets) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  auto getter = MakeClient(server->port());
  auto setter = MakeClient(server->port());
  ASSERT_NE(getter, nullptr);
  ASSERT_NE(setter, nullptr);

  absl::StatusOr<std::string> got = absl::UnknownError("not run");
  std::jthread t([&] { got = getter->Get("late", kLong); });  // Joined even if an ASSERT fails.
  // The Get is parked on the server, so it cannot have returned a value yet.
  ASSERT_TRUE(server->WaitForBlockedRequestsForTest(1, kLong));
  ASSERT_TRUE(setter->Set("late", "here").ok());
  t.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
  EXPECT_TRUE(server->WaitForBlockedRequestsForTest(0, kLong));
}

TEST(TcpStoreTest, GetTimesOutNamingTheKey) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->port());
  ASSERT_NE(client, nullptr);

  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = client->Get("never/set", absl::Milliseconds(50));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "'never/set'")) << got.status();

  // A timeout leaves the connection usable, and a zero timeout just checks.
  ASSERT_TRUE(client->Set("k", "v").ok());
  EXPECT_EQ(client->Get("k", absl::ZeroDuration()).value_or("?"), "v");
  EXPECT_EQ(client->Get("nope", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TcpStoreTest, WaitForSeveralKeys) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  auto waiter = MakeClient(server->port());
  auto setter = MakeClient(server->port());
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);

  ASSERT_TRUE(setter->Set("k1", "a").ok());
  absl::Status partial = waiter->Wait({"k1", "k2", "k3"}, absl::Milliseconds(30));
  EXPECT_EQ(partial.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(partial.message(), "'k2', 'k3'")) << partial;
  EXPECT_FALSE(absl::StrContains(partial.message(), "'k1'")) << partial;

  absl::Status waited = absl::UnknownError("not run");
  std::jthread t([&] { waited = waiter->Wait({"k1", "k2", "k3"}, kLong); });
  ASSERT_TRUE(server->WaitForBlockedRequestsForTest(1, kLong));
  ASSERT_TRUE(setter->Set("k2", "b").ok());
  ASSERT_TRUE(setter->Set("k3", "c").ok());
  t.join();
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST(TcpStoreTest, ClientRefusesOversizedRequests) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  const std::string long_key(TcpStore::kMaxKeyBytes + 1, 'k');
  EXPECT_EQ(server->Set(long_key, "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server->Get(long_key, kLong).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server->Set("k", std::string(TcpStore::kMaxValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(server->Set(std::string(TcpStore::kMaxKeyBytes, 'k'), "ok").ok());
}

TEST(TcpStoreTest, MalformedBytesCloseOnlyThatConnection) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  auto client = MakeClient(server->port());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("before", "1").ok());

  const std::vector<std::string> hostile = {
      std::string("\xff garbage", 9),                                       // Unknown op.
      std::string(1, '\x01') + U32(0xffffffffu),                            // Key too long.
      std::string(1, '\x01') + U32(1) + "k" + U32((16u << 20) + 1),         // Value too long.
      std::string(1, '\x03') + std::string(8, '\0') + U32(0x7fffffffu),     // Too many keys.
      std::string(1, '\x02') + std::string(8, '\0') + U32(5000) + "short",  // Key too long.
      std::string("\0\0\0\0", 4),                                           // Op 0.
  };
  for (size_t i = 0; i < hostile.size(); ++i) {
    int fd = RawConnect(server->port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, hostile[i].data(), hostile[i].size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(hostile[i].size()));
    EXPECT_TRUE(PeerClosesWithin(fd, kLong)) << "payload " << i;
    ::close(fd);
  }
  // A request cut short, then the peer leaves.
  int fd = RawConnect(server->port());
  ASSERT_GE(fd, 0);
  const std::string cut = std::string(1, '\x01') + U32(100) + "only-part";
  ASSERT_EQ(::send(fd, cut.data(), cut.size(), MSG_NOSIGNAL), static_cast<ssize_t>(cut.size()));
  ::close(fd);

  // The server and the existing connection are unaffected; new ones work too.
  EXPECT_EQ(client->Get("before", kLong).value_or("?"), "1");
  auto fresh = MakeClient(server->port());
  ASSERT_NE(fresh, nullptr);
  ASSERT_TRUE(fresh->Set("after", "2").ok());
  EXPECT_EQ(client->Get("after", kLong).value_or("?"), "2");
  // Nothing a hostile client sent was stored.
  EXPECT_EQ(client->Get("k", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(TcpStoreTest, NoServerIsDeadlineExceededWithinTheTimeout) {
  const int port = UnusedPort();
  const absl::Duration timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto store = TcpStore::Create("127.0.0.1", port, /*is_server=*/false, timeout);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDeadlineExceeded) << store.status();
  EXPECT_TRUE(absl::StrContains(store.status().message(), absl::StrCat("127.0.0.1:", port)))
      << store.status();
  EXPECT_GE(took, timeout);
  EXPECT_LT(took, timeout + absl::Seconds(2));
}

TEST(TcpStoreTest, ClientConnectsToAServerThatStartsLater) {
  const int port = UnusedPort();
  absl::StatusOr<std::unique_ptr<TcpStore>> client = absl::UnknownError("not run");
  std::thread t([&] { client = TcpStore::Create("127.0.0.1", port, false, kLong); });
  auto server = TcpStore::Create("127.0.0.1", port, /*is_server=*/true, kLong);
  t.join();
  if (!server.ok()) GTEST_SKIP() << "port taken meanwhile: " << server.status();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*server)->Set("k", "v").ok());
  EXPECT_EQ((*client)->Get("k", kLong).value_or("?"), "v");
}

TEST(TcpStoreTest, ClientOfANewSessionIsTurnedAwayByAStaleServerUntilTheRightOneComesUp) {
  // A restarted job's rank 1 can reach the previous generation's rank 0, still stopping, on the
  // same port: it must not use that server, and must find the new one once it is up.
  auto stale = TcpStore::Create("127.0.0.1", 0, /*is_server=*/true, kLong, "job-1/gen0");
  ASSERT_TRUE(stale.ok()) << stale.status();
  const int port = (*stale)->port();
  auto same = TcpStore::Create("127.0.0.1", port, false, kLong, "job-1/gen0");
  ASSERT_TRUE(same.ok()) << same.status();

  auto early = TcpStore::Create("127.0.0.1", port, false, absl::Milliseconds(300), "job-1/gen1");
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded) << early.status();
  EXPECT_TRUE(absl::StrContains(early.status().message(), "another session")) << early.status();

  absl::StatusOr<std::unique_ptr<TcpStore>> client = absl::UnknownError("not run");
  std::thread t([&] { client = TcpStore::Create("127.0.0.1", port, false, kLong, "job-1/gen1"); });
  same->reset();
  stale->reset();  // the old rank 0 exits; the new one binds the same port
  auto fresh = TcpStore::Create("127.0.0.1", port, /*is_server=*/true, kLong, "job-1/gen1");
  t.join();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*fresh)->Set("addr/0", "x").ok());
  EXPECT_EQ((*client)->Get("addr/0", kLong).value_or("?"), "x");
}

// The next generation's rank 0 may start while the previous one still holds MASTER_PORT (an
// agent restarted after a crash does not know the old process): the server retries the bind
// until its timeout, and says so when the port stays taken.
TEST(TcpStoreTest, ServerWaitsForAPortStillInUse) {
  auto old = TcpStore::Create("127.0.0.1", 0, /*is_server=*/true, kLong, "job-1/gen0");
  ASSERT_TRUE(old.ok()) << old.status();
  const int port = (*old)->port();

  auto busy = TcpStore::Create("127.0.0.1", port, true, absl::Milliseconds(400), "job-1/gen1");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kAlreadyExists) << busy.status();
  EXPECT_TRUE(
      absl::StrContains(busy.status().message(), absl::StrCat("cannot listen on 127.0.0.1:", port)))
      << busy.status();
  EXPECT_TRUE(absl::StrContains(busy.status().message(), "still, after waiting 400ms"))
      << busy.status();

  absl::StatusOr<std::unique_ptr<TcpStore>> fresh = absl::UnknownError("not run");
  std::thread t([&] { fresh = TcpStore::Create("127.0.0.1", port, true, kLong, "job-1/gen1"); });
  old->reset();  // the old rank 0 exits
  t.join();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->port(), port);
}

TEST(TcpStoreTest, LostServerIsUnavailable) {
  auto server = MakeServer();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  auto client = MakeClient(port);
  auto blocked = MakeClient(port);
  ASSERT_NE(client, nullptr);
  ASSERT_NE(blocked, nullptr);
  ASSERT_TRUE(client->Set("k", "v").ok());

  absl::StatusOr<std::string> got = absl::UnknownError("not run");
  std::jthread t([&] { got = blocked->Get("never", absl::Seconds(60)); });
  ASSERT_TRUE(server->WaitForBlockedRequestsForTest(1, kLong));
  const absl::Time start = absl::Now();
  server.reset();  // Must wake the parked Get rather than wait out its 60 s.
  t.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();

  const std::string where = absl::StrCat("127.0.0.1:", port);
  absl::Status s = client->Set("k2", "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), where)) << s;
  absl::StatusOr<std::string> again = client->Get("k", kLong);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable) << again.status();
  EXPECT_TRUE(absl::StrContains(again.status().message(), where)) << again.status();
}

TEST(TcpStoreTest, BadArguments) {
  EXPECT_EQ(TcpStore::Create("127.0.0.1", 0, false, kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStore::Create("127.0.0.1", 70000, true, kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStore::Create("", 1234, false, kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, GlooRendezvousWithTwoRanks) {
  auto rank0_store = MakeServer();
  ASSERT_NE(rank0_store, nullptr);
  auto rank1_store = MakeClient(rank0_store->port());
  ASSERT_NE(rank1_store, nullptr);
  Store* stores[2] = {rank0_store.get(), rank1_store.get()};

  constexpr size_t kN = 1037;
  std::string errors[2];
  std::vector<float> data[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto comm = GlooCommunicator::Create(*stores[r], r, 2, "127.0.0.1", kLong);
      if (!comm.ok()) {
        errors[r] = comm.status().ToString();
        return;
      }
      data[r].resize(kN);
      for (size_t i = 0; i < kN; ++i) data[r][i] = 1000.0f * r + i;
      absl::Status s = (*comm)->AllReduceSum(data[r].data(), kN);
      if (!s.ok()) errors[r] = s.ToString();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_EQ(data[r][i], 1000.0f + 2.0f * i) << "rank " << r << " i " << i;
    }
  }
}

}  // namespace
}  // namespace ringmaster::trainer
