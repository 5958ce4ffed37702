// ctest-labels: unit
#include "security/refusals.h"

#include "gtest/gtest.h"

namespace ringmaster::security {
namespace {

TEST(PeerHostTest, DropsThePortOnly) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:51234"), "ipv4:10.0.0.7");
  EXPECT_EQ(PeerHost("ipv6:[::1]:443"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:%5B::1%5D:443"), "ipv6:%5B::1%5D");
  EXPECT_EQ(PeerHost("unix:/run/ringmaster.sock"), "unix:/run/ringmaster.sock");
  EXPECT_EQ(PeerHost("unix:"), "unix:");
  EXPECT_EQ(PeerHost(""), "");
}

TEST(RefusalsTest, NamesAreTheMetricLabels) {
  EXPECT_EQ(RefusalName(Refusal::kMissingToken), "missing_token");
  EXPECT_EQ(RefusalName(Refusal::kWrongToken), "wrong_token");
  EXPECT_EQ(RefusalName(Refusal::kNodeSecret), "node_secret");
  EXPECT_EQ(RefusalName(Refusal::kStreamInUse), "stream_in_use");
  EXPECT_EQ(RefusalName(Refusal::kRegistration), "registration");
}

TEST(RefusalsTest, CountsEveryRefusalAndLogsAFewPerReasonAndHost) {
  Refusals refusals(absl::Minutes(1), /*burst=*/2);
  const absl::Time t0 = absl::FromUnixSeconds(5000);
  int lines = 0;
  // 1000 wrong tokens from one host, each on a new connection (a new port).
  for (int i = 0; i < 1000; ++i) {
    const std::string peer = "ipv4:10.0.0.9:" + std::to_string(40000 + i);
    if (!refusals.Admit(Refusal::kWrongToken, peer, "refused from " + peer, t0).empty()) ++lines;
  }
  EXPECT_EQ(lines, 2);
  EXPECT_EQ(refusals.count(Refusal::kWrongToken), 1000u);
  EXPECT_EQ(refusals.count(Refusal::kMissingToken), 0u);
  // Another host, and another reason from the first host, have lines of their own.
  EXPECT_EQ(refusals.Admit(Refusal::kWrongToken, "ipv4:10.0.0.10:1", "other host", t0),
            "other host");
  EXPECT_EQ(refusals.Admit(Refusal::kMissingToken, "ipv4:10.0.0.9:2", "no token", t0), "no token");
  EXPECT_EQ(refusals.count(Refusal::kWrongToken), 1001u);
  EXPECT_EQ(refusals.count(Refusal::kMissingToken), 1u);
  // The next window's first line says how many were left out.
  EXPECT_EQ(refusals.Admit(Refusal::kWrongToken, "ipv4:10.0.0.9:3", "again", t0 + absl::Minutes(1)),
            "again (998 similar warnings left out)");
}

}  // namespace
}  // namespace ringmaster::security
