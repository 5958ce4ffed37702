#include "trainer/comm/comm_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace ringmaster::trainer {
namespace {

TEST(CommQueue, RunsInSubmissionOrderAndReportsEachStatus) {
  CommQueue q;
  std::vector<int> order;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 50; ++i) {
    works.push_back(q.Submit([&order, i] {
      order.push_back(i);
      return absl::OkStatus();
    }));
  }
  ASSERT_TRUE(q.Drain().ok());
  for (auto& w : works) EXPECT_TRUE(w->IsDone());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(CommQueue, FailurePoisonsLaterOperations) {
  CommQueue q;
  std::atomic<int> ran{0};
  auto a = q.Submit([&] {
    ++ran;
    return absl::OkStatus();
  });
  auto b = q.Submit([&] {
    ++ran;
    return absl::UnavailableError("peer rank 3 lost");
  });
  auto c = q.Submit([&] {
    ++ran;
    return absl::OkStatus();
  });
  EXPECT_TRUE(a->Wait().ok());
  EXPECT_EQ(b->Wait().code(), absl::StatusCode::kUnavailable);
  const absl::Status sc = c->Wait();
  EXPECT_EQ(sc.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(sc.message()).find("peer rank 3 lost"), std::string::npos);
  EXPECT_EQ(ran.load(), 2);  // c never ran
  EXPECT_EQ(q.Drain().code(), absl::StatusCode::kUnavailable);
}

TEST(CommQueue, DestructorFinishesQueuedWork) {
  std::atomic<int> ran{0};
  {
    CommQueue q;
    for (int i = 0; i < 10; ++i)
      q.Submit([&] {
        ++ran;
        return absl::OkStatus();
      });
  }
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace ringmaster::trainer
