#include "security/loopback.h"

#include <gtest/gtest.h>

namespace ringmaster::security {
namespace {

TEST(LoopbackTest, Hosts) {
  for (const char* h :
       {"localhost", "LocalHost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"", "0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "192.168.1.127",
                        "localhost.example.com", "::2", "example.com", "127.0.0.1.nip.io"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

TEST(LoopbackTest, HostOfAddress) {
  EXPECT_EQ(*HostOfAddress("127.0.0.1:7070"), "127.0.0.1");
  EXPECT_EQ(*HostOfAddress("[::1]:7070"), "::1");
  EXPECT_EQ(*HostOfAddress("dns:///localhost:7070"), "localhost");
  EXPECT_EQ(*HostOfAddress("ipv4:10.1.2.3:1"), "10.1.2.3");
  EXPECT_EQ(*HostOfAddress(":7070"), "");
  EXPECT_FALSE(HostOfAddress("127.0.0.1").ok());
  EXPECT_FALSE(HostOfAddress("::1:7070").ok());  // IPv6 needs brackets
}

TEST(LoopbackTest, Addresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7070"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7070"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/run/ringmaster.sock"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackAddress(":7070"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("coordinator:7070"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1"));
}

}  // namespace
}  // namespace ringmaster::security
