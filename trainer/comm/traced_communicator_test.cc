// TracedCommunicator numbers collectives across the communicators that share a counter and
// reports each one entered and left, passing results (and failures) through unchanged.
#include "trainer/comm/traced_communicator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/comm/local_communicator.h"

namespace ringmaster::trainer {
namespace {

struct Event {
  bool enter;
  uint64_t seq;
  Collective op;
};

class RecordingObserver : public CollectiveObserver {
 public:
  void OnEnter(uint64_t seq, Collective op) override { events.push_back({true, seq, op}); }
  void OnLeave(uint64_t seq, Collective op, double seconds) override {
    EXPECT_GE(seconds, 0);
    events.push_back({false, seq, op});
  }
  std::vector<Event> events;
};

class FailingCommunicator : public LocalCommunicator {
 public:
  std::shared_ptr<Work> BarrierAsync(CommStream) override {
    return MakeCompletedWork(absl::UnavailableError("Barrier #9: peer gone"));
  }
};

TEST(TracedCommunicatorTest, NumbersCollectivesAcrossCommunicatorsSharingACounter) {
  LocalCommunicator a_inner;
  FailingCommunicator b_inner;
  RecordingObserver obs;
  std::atomic<uint64_t> counter{0};
  TracedCommunicator a(&a_inner, &obs, &counter), b(&b_inner, &obs, &counter);

  float x[2] = {1, 2}, y[2] = {0, 0};
  ASSERT_TRUE(a.AllReduceSum(x, 2).ok());
  ASSERT_TRUE(b.AllGather(x, y, 2).ok());
  EXPECT_EQ(y[1], 2);  // the inner communicator really ran
  absl::Status s = b.Barrier();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "in collective #3 (Barrier, as `ringmaster status` numbers it): Barrier #9: peer gone");
  ASSERT_TRUE(a.Broadcast(x, 2, 0).ok());

  const std::vector<std::pair<uint64_t, Collective>> want = {{1, Collective::kAllReduceSum},
                                                             {2, Collective::kAllGather},
                                                             {3, Collective::kBarrier},
                                                             {4, Collective::kBroadcast}};
  ASSERT_EQ(obs.events.size(), 2 * want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    for (int k = 0; k < 2; ++k) {
      const Event& e = obs.events[2 * i + k];
      EXPECT_EQ(e.enter, k == 0) << i;
      EXPECT_EQ(e.seq, want[i].first) << i;
      EXPECT_EQ(e.op, want[i].second) << i;
    }
  }
  EXPECT_STREQ(CollectiveName(Collective::kReduceScatterSum), "ReduceScatterSum");
  EXPECT_EQ(a.size(), 1);
}

// A Work that completes when the test says so, like an NCCL operation still on its stream.
class PendingWork : public Work {
 public:
  absl::Status Wait() override {
    done = true;
    return status;
  }
  bool IsDone() override { return done; }
  bool done = false;
  absl::Status status = absl::DeadlineExceededError("AllReduceSum #0 did not complete");
};

class StreamOrderedCommunicator : public LocalCommunicator {
 public:
  std::shared_ptr<Work> AllReduceSumAsync(void*, size_t, DataType, CommStream) override {
    return pending;
  }
  std::shared_ptr<PendingWork> pending = std::make_shared<PendingWork>();
};

TEST(TracedCommunicatorTest, AStreamOrderedOperationLeavesWhenItsWorkIsDone) {
  StreamOrderedCommunicator inner;
  RecordingObserver obs;
  std::atomic<uint64_t> counter{0};
  TracedCommunicator traced(&inner, &obs, &counter);

  uint16_t x[4] = {};
  std::shared_ptr<Work> w = traced.AllReduceSumAsync(x, 4, DataType::kBFloat16, CommStream());
  ASSERT_EQ(obs.events.size(), 1u);  // entered, not left: the hang diagnosis sees it running
  EXPECT_TRUE(obs.events[0].enter);
  EXPECT_FALSE(w->IsDone());
  EXPECT_EQ(obs.events.size(), 1u);

  const absl::Status s = w->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "in collective #1 (AllReduceSum, as `ringmaster status` numbers it): AllReduceSum #0 "
            "did not complete");
  ASSERT_EQ(obs.events.size(), 2u);
  EXPECT_FALSE(obs.events[1].enter);
  EXPECT_EQ(obs.events[1].seq, 1u);
  EXPECT_TRUE(w->IsDone());
  EXPECT_EQ(w->Wait(), s);           // the same status again
  EXPECT_EQ(obs.events.size(), 2u);  // and left only once

  // A byte all-gather keeps its own label.
  uint8_t in[2] = {1, 2}, out[2] = {};
  ASSERT_TRUE(traced.AllGatherBytes(in, out, 2).ok());
  EXPECT_EQ(obs.events.back().op, Collective::kAllGatherBytes);
  EXPECT_EQ(out[1], 2);
}

}  // namespace
}  // namespace ringmaster::trainer
