// Rendezvous driven by a FakeClock: MAX completes at once, MIN opens a last-call window, the join
// timeout fails with who is there and how many are missing.
#include "coordinator/state/rendezvous.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

RendezvousOptions Nodes(int min, int max) {
  RendezvousOptions o;
  o.min_nodes = min;
  o.max_nodes = max;
  return o;
}

Rendezvous MustStart(const RendezvousOptions& o, const Clock& clock) {
  absl::StatusOr<Rendezvous> r = Rendezvous::Start(o, clock);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(r).value();
}

TEST(RendezvousTest, CompletesAtOnceWhenMaxJoin) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(2, 3), clock);
  ASSERT_TRUE(r.Join("a").ok());
  ASSERT_TRUE(r.Join("b").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kLastCall);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(r.Join("c").ok());
  const RendezvousStatus& s = r.Poll();
  EXPECT_EQ(s.state, RendezvousState::kComplete);
  EXPECT_THAT(s.joined, ElementsAre("a", "b", "c"));
  EXPECT_EQ(s.open_slots, 0);
  EXPECT_EQ(s.missing_for_min, 0);
  EXPECT_EQ(s.completed, clock.Now());
  EXPECT_FALSE(r.NextDeadline().has_value());
}

TEST(RendezvousTest, SingleNodeJobCompletesOnFirstJoin) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(1, 1), clock);
  ASSERT_TRUE(r.Join("only").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kComplete);
}

TEST(RendezvousTest, LastCallWindowCompletesWithWhoeverJoined) {
  FakeClock clock;
  RendezvousOptions o = Nodes(2, 4);
  o.last_call = absl::Seconds(5);
  Rendezvous r = MustStart(o, clock);
  ASSERT_TRUE(r.Join("a").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kWaiting);
  EXPECT_EQ(r.Poll().missing_for_min, 1);
  EXPECT_EQ(r.Poll().open_slots, 3);

  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(r.Join("b").ok());  // MIN reached at t=10: last call until t=15
  const absl::Time deadline = clock.Now() + absl::Seconds(5);
  EXPECT_EQ(r.Poll().state, RendezvousState::kLastCall);
  EXPECT_EQ(r.Poll().last_call_deadline, deadline);
  EXPECT_EQ(r.NextDeadline(), deadline);

  clock.Advance(absl::Seconds(4));
  ASSERT_TRUE(r.Join("c").ok());  // within the window; does not extend it
  EXPECT_EQ(r.Poll().state, RendezvousState::kLastCall);
  EXPECT_EQ(r.Poll().last_call_deadline, deadline);

  clock.Advance(absl::Seconds(1));  // t = 15: the window is over
  const RendezvousStatus& s = r.Poll();
  EXPECT_EQ(s.state, RendezvousState::kComplete);
  EXPECT_THAT(s.joined, ElementsAre("a", "b", "c"));
  EXPECT_EQ(s.completed, deadline);

  absl::Status late = r.Join("d");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.message(), AllOf(HasSubstr("complete"), HasSubstr("d")));
  EXPECT_THAT(r.Poll().joined, ElementsAre("a", "b", "c"));
}

TEST(RendezvousTest, JoinAtTheLastCallDeadlineIsTooLate) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(1, 2), clock);
  ASSERT_TRUE(r.Join("a").ok());
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(r.Join("b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.Poll().joined, ElementsAre("a"));
}

TEST(RendezvousTest, ZeroLastCallCompletesWhenMinJoin) {
  FakeClock clock;
  RendezvousOptions o = Nodes(2, 8);
  o.last_call = absl::ZeroDuration();
  Rendezvous r = MustStart(o, clock);
  ASSERT_TRUE(r.Join("a").ok());
  ASSERT_TRUE(r.Join("b").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kComplete);
}

TEST(RendezvousTest, JoinTimeoutFailsNamingWhoIsThereAndHowManyAreMissing) {
  FakeClock clock;
  RendezvousOptions o = Nodes(3, 4);
  o.join_timeout = absl::Seconds(300);
  Rendezvous r = MustStart(o, clock);
  ASSERT_TRUE(r.Join("node-a").ok());
  clock.Advance(absl::Seconds(299));
  EXPECT_EQ(r.Poll().state, RendezvousState::kWaiting);
  EXPECT_EQ(r.NextDeadline(), clock.Now() + absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  const RendezvousStatus& s = r.Poll();
  ASSERT_EQ(s.state, RendezvousState::kFailed);
  EXPECT_EQ(s.error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.error.message(), AllOf(HasSubstr("5m"), HasSubstr("1 of 3..4"), HasSubstr("node-a"),
                                       HasSubstr("2 more needed")));
  EXPECT_EQ(s.missing_for_min, 2);
  EXPECT_EQ(s.open_slots, 0);
  EXPECT_EQ(r.Join("node-b").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RendezvousTest, MinReachedBeforeTimeoutIsNotFailedByIt) {
  FakeClock clock;
  RendezvousOptions o = Nodes(2, 4);
  o.join_timeout = absl::Seconds(10);
  Rendezvous r = MustStart(o, clock);
  ASSERT_TRUE(r.Join("a").ok());
  clock.Advance(absl::Seconds(8));
  ASSERT_TRUE(r.Join("b").ok());  // last call ends at t=13, after the join timeout
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(r.Poll().state, RendezvousState::kLastCall);
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(r.Poll().state, RendezvousState::kComplete);
}

TEST(RendezvousTest, LeavingBelowMinClosesTheLastCall) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(2, 4), clock);
  ASSERT_TRUE(r.Join("a").ok());
  ASSERT_TRUE(r.Join("b").ok());
  ASSERT_EQ(r.Poll().state, RendezvousState::kLastCall);
  ASSERT_TRUE(r.Leave("a").ok());
  const RendezvousStatus& s = r.Poll();
  EXPECT_EQ(s.state, RendezvousState::kWaiting);
  EXPECT_FALSE(s.last_call_deadline.has_value());
  EXPECT_THAT(s.joined, ElementsAre("b"));
  EXPECT_EQ(s.missing_for_min, 1);
  clock.Advance(absl::Seconds(60));  // the old window's end passes: still waiting
  EXPECT_EQ(r.Poll().state, RendezvousState::kWaiting);
  ASSERT_TRUE(r.Join("c").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kLastCall);
  EXPECT_EQ(r.Poll().last_call_deadline, clock.Now() + absl::Seconds(5));

  EXPECT_EQ(r.Leave("zz").code(), absl::StatusCode::kNotFound);
}

TEST(RendezvousTest, LeavingBelowMinAfterTheJoinDeadlineFails) {
  FakeClock clock;
  RendezvousOptions o = Nodes(2, 3);
  o.join_timeout = absl::Seconds(10);
  o.last_call = absl::Seconds(30);
  Rendezvous r = MustStart(o, clock);
  ASSERT_TRUE(r.Join("a").ok());
  ASSERT_TRUE(r.Join("b").ok());
  clock.Advance(absl::Seconds(20));
  ASSERT_TRUE(r.Leave("b").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kFailed);
  EXPECT_THAT(r.Poll().error.message(), HasSubstr("1 more needed"));
}

TEST(RendezvousTest, RepeatedJoinIsANoOp) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(2, 2), clock);
  ASSERT_TRUE(r.Join("a").ok());
  ASSERT_TRUE(r.Join("a").ok());
  EXPECT_EQ(r.Poll().state, RendezvousState::kWaiting);
  EXPECT_THAT(r.Poll().joined, ElementsAre("a"));
  EXPECT_EQ(r.Join("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, ErrorListsAreBounded) {
  FakeClock clock;
  Rendezvous r = MustStart(Nodes(100, 100), clock);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(r.Join("node-" + std::to_string(i)).ok());
  clock.Advance(absl::Seconds(300));
  const std::string msg(r.Poll().error.message());
  EXPECT_THAT(msg,
              AllOf(HasSubstr("node-9"), HasSubstr("and 40 more"), HasSubstr("50 more needed")));
  EXPECT_EQ(msg.find("node-10"), std::string::npos);
}

TEST(RendezvousTest, RejectsBadOptions) {
  FakeClock clock;
  EXPECT_EQ(Rendezvous::Start(Nodes(0, 1), clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Rendezvous::Start(Nodes(3, 2), clock).status().code(),
            absl::StatusCode::kInvalidArgument);
  RendezvousOptions o = Nodes(1, 1);
  o.join_timeout = absl::ZeroDuration();
  EXPECT_FALSE(Rendezvous::Start(o, clock).ok());
  o = Nodes(1, 1);
  o.last_call = absl::Seconds(-1);
  EXPECT_FALSE(Rendezvous::Start(o, clock).ok());
}

}  // namespace
}  // namespace ringmaster::coordinator
