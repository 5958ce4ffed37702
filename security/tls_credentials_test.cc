#include "security/tls_credentials.h"

#include <gtest/gtest.h>

namespace ringmaster::security {
namespace {

TEST(TlsCredentialsTest, PlaintextOnlyOnLoopbackAndOnlyWhenAsked) {
  EXPECT_TRUE(ServerCredentialsFor("127.0.0.1:0", {}, true).ok());
  EXPECT_TRUE(ServerCredentialsFor("[::1]:7070", {}, true).ok());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> s =
      ServerCredentialsFor("0.0.0.0:7070", {}, true);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("loopback"), std::string_view::npos) << s.status();
  s = ServerCredentialsFor("127.0.0.1:0", {}, false);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--tls-cert"), std::string_view::npos) << s.status();

  EXPECT_TRUE(ChannelCredentialsFor("127.0.0.1:7070", {}, true).ok());
  EXPECT_FALSE(ChannelCredentialsFor("10.0.0.1:7070", {}, true).ok());
  // TLS without files trusts the system's roots.
  EXPECT_TRUE(ChannelCredentialsFor("10.0.0.1:7070", {}, false).ok());
}

// --tls-server-name is a TLS setting: with plaintext it is refused, not ignored.
TEST(TlsCredentialsTest, ChannelWithAServerNameNeedsTls) {
  TlsOptions tls;
  tls.server_name = "coordinator.ringmaster.test";
  EXPECT_TRUE(ControlPlaneChannel("127.0.0.1:7070", tls, false).ok());
  absl::StatusOr<std::shared_ptr<grpc::Channel>> c =
      ControlPlaneChannel("127.0.0.1:7070", tls, true);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--insecure-loopback turns TLS off"), std::string_view::npos)
      << c.status();
  EXPECT_TRUE(ControlPlaneChannel("127.0.0.1:7070", {}, true).ok());
  EXPECT_FALSE(ControlPlaneChannel("10.0.0.1:7070", {}, true).ok());
}

TEST(TlsCredentialsTest, ErrorsNameTheFile) {
  TlsOptions tls;
  tls.cert_file = "/nonexistent/server.crt";
  tls.key_file = "/nonexistent/server.key";
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> s =
      ServerCredentialsFor("0.0.0.0:7070", tls, false);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/server.crt"), std::string_view::npos)
      << s.status();
  EXPECT_FALSE(ServerCredentialsFor("127.0.0.1:7070", tls, true).ok());  // not both

  TlsOptions client;
  client.ca_file = "/nonexistent/ca.crt";
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> c =
      ChannelCredentialsFor("10.0.0.1:7070", client, false);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/ca.crt"), std::string_view::npos) << c.status();
  client = {};
  client.cert_file = "/x.crt";
  EXPECT_FALSE(ChannelCredentialsFor("10.0.0.1:7070", client, false).ok());  // no key
}

}  // namespace
}  // namespace ringmaster::security
