// CallLimits: the per-host Register bucket and stream slots.
#include "coordinator/service/call_limits.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace ringmaster::coordinator {
namespace {

TEST(CallLimitsTest, RegisterBucketRefillsPerHostAndIgnoresThePort) {
  CallLimitOptions o;
  o.register_per_second = 2;
  o.register_burst = 3;
  CallLimits limits(o);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  // One host on new connections (new ports) shares one bucket: 3, then refused.
  EXPECT_TRUE(limits.AllowRegister("ipv4:10.0.0.1:5001", t0));
  EXPECT_TRUE(limits.AllowRegister("ipv4:10.0.0.1:5002", t0));
  EXPECT_TRUE(limits.AllowRegister("ipv4:10.0.0.1:5003", t0));
  EXPECT_FALSE(limits.AllowRegister("ipv4:10.0.0.1:5004", t0));
  // Another host has its own.
  EXPECT_TRUE(limits.AllowRegister("ipv4:10.0.0.2:5001", t0));
  // Half a second gives one token back (2 a second), not more.
  EXPECT_TRUE(limits.AllowRegister("ipv4:10.0.0.1:5005", t0 + absl::Milliseconds(500)));
  EXPECT_FALSE(limits.AllowRegister("ipv4:10.0.0.1:5006", t0 + absl::Milliseconds(500)));
  // A long pause refills up to the burst only.
  const absl::Time later = t0 + absl::Hours(1);
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += limits.AllowRegister("ipv4:10.0.0.1:6000", later);
  EXPECT_EQ(allowed, 3);
}

TEST(CallLimitsTest, ZeroRateIsNoLimit) {
  CallLimitOptions o;
  o.register_per_second = 0;
  CallLimits limits(o);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limits.AllowRegister("ipv4:10.0.0.1:1"));
}

TEST(CallLimitsTest, StreamSlotsPerHostAndKindAreGivenBack) {
  CallLimitOptions o;
  o.streams_per_peer = 2;
  CallLimits limits(o);
  std::vector<CallLimits::Slot> held;
  for (int i = 0; i < 2; ++i) {
    std::optional<CallLimits::Slot> s = limits.AcquireStream(StreamKind::kWatchJob, "ipv4:a:1");
    ASSERT_TRUE(s.has_value());
    held.push_back(*std::move(s));
  }
  EXPECT_FALSE(limits.AcquireStream(StreamKind::kWatchJob, "ipv4:a:9").has_value());
  // Other kinds and other hosts count apart.
  EXPECT_TRUE(limits.AcquireStream(StreamKind::kHeartbeatFirstMessage, "ipv4:a:9").has_value());
  EXPECT_TRUE(limits.AcquireStream(StreamKind::kWatchJob, "ipv4:b:9").has_value());
  held.pop_back();  // a stream ends: its slot is free again
  EXPECT_TRUE(limits.AcquireStream(StreamKind::kWatchJob, "ipv4:a:9").has_value());
}

TEST(CallLimitsTest, HostsBeyondMaxPeersShareOneCount) {
  CallLimitOptions o;
  o.streams_per_peer = 1;
  o.max_peers = 2;
  CallLimits limits(o);
  auto a = limits.AcquireStream(StreamKind::kWatchJob, "ipv4:a:1");
  auto b = limits.AcquireStream(StreamKind::kWatchJob, "ipv4:b:1");
  ASSERT_TRUE(a && b);
  auto c = limits.AcquireStream(StreamKind::kWatchJob, "ipv4:c:1");  // the shared count
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(limits.AcquireStream(StreamKind::kWatchJob, "ipv4:d:1").has_value());
}

}  // namespace
}  // namespace ringmaster::coordinator
