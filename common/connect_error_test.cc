// ctest-labels: unit
#include "common/connect_error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// gRPC's own texts for these failures (1.51, OpenSSL 3), as the CLI received them.
constexpr char kWrongVersion[] =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7070: Ssl "
    "handshake failed: SSL_ERROR_SSL: error:0A00010B:SSL routines::wrong version number";
constexpr char kRefused[] =
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7070: Failed to "
    "connect to remote host: Connection refused";

absl::Status Explain(absl::StatusCode code, const char* text, bool plaintext = false) {
  return ExplainCoordinatorError(absl::Status(code, text),
                                 {"127.0.0.1:7070", plaintext, "--coordinator"});
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(ExplainCoordinatorErrorTest, TlsClientPlaintextServerNamesInsecureLoopback) {
  absl::Status s = Explain(absl::StatusCode::kUnavailable, kWrongVersion);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(s), StartsWith("the coordinator at 127.0.0.1:7070 speaks plaintext"));
  EXPECT_THAT(Msg(s), HasSubstr("--insecure-loopback"));
  EXPECT_THAT(Msg(s), HasSubstr("[gRPC: failed to connect"));  // the original follows
}

TEST(ExplainCoordinatorErrorTest, AbsentCoordinatorNamesTheAddressFlag) {
  absl::Status s = Explain(absl::StatusCode::kUnavailable, kRefused);
  EXPECT_THAT(Msg(s), StartsWith("no coordinator is listening at 127.0.0.1:7070"));
  EXPECT_THAT(Msg(s), HasSubstr("--coordinator HOST:PORT"));
}

TEST(ExplainCoordinatorErrorTest, CertificateProblemsNameTheirFlags) {
  EXPECT_THAT(Msg(Explain(absl::StatusCode::kUnavailable,
                          "Ssl handshake failed: SSL_ERROR_SSL: error:0A000086:SSL "
                          "routines::certificate verify failed")),
              HasSubstr("--tls-ca FILE"));
  EXPECT_THAT(Msg(Explain(absl::StatusCode::kUnavailable,
                          "Peer name coord.example is not in peer certificate")),
              HasSubstr("--tls-server-name NAME"));
}

TEST(ExplainCoordinatorErrorTest, PlaintextClientClosedByTlsServer) {
  const char* closed =
      "failed to connect to all addresses; last error: UNAVAILABLE: "
      "ipv4:127.0.0.1:7070: Socket closed";
  EXPECT_THAT(Msg(Explain(absl::StatusCode::kUnavailable, closed, /*plaintext=*/true)),
              HasSubstr("expects TLS. Drop --insecure-loopback"));
}

TEST(ExplainCoordinatorErrorTest, OtherErrorsPassUnchanged) {
  const absl::Status denied = absl::PermissionDeniedError("submit token required");
  EXPECT_EQ(ExplainCoordinatorError(denied, {"a:1"}), denied);
  // A call that reached the coordinator and ran out of time is not "cannot reach".
  const absl::Status slow = absl::DeadlineExceededError("Deadline Exceeded");
  EXPECT_EQ(ExplainCoordinatorError(slow, {"a:1"}), slow);
  const absl::Status odd = absl::UnavailableError("something new");
  EXPECT_EQ(ExplainCoordinatorError(odd, {"a:1"}), odd);
  // "Connection refused" inside an application error is not a transport failure.
  const absl::Status app = absl::InvalidArgumentError("Connection refused by policy");
  EXPECT_EQ(ExplainCoordinatorError(app, {"a:1"}), app);
}

}  // namespace
}  // namespace ringmaster
