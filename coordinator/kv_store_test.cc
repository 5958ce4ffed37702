// KvStore: values per (job, generation), only the current generation served, blocking reads
// woken by a writer or by the generation moving on, and timeouts that name the missing keys.
#include "coordinator/kv_store.h"

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(KvStoreTest, SetThenGet) {
  KvStore kv;
  kv.SetGeneration("job-1", 0);
  ASSERT_TRUE(kv.Set("job-1", 0, "nccl_id", "abc").ok());
  absl::StatusOr<std::string> v = kv.Get("job-1", 0, "nccl_id", absl::ZeroDuration());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "abc");
  EXPECT_EQ(kv.Get("job-1", 0, "other", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(KvStoreTest, OnlyTheCurrentGenerationIsServed) {
  KvStore kv;
  EXPECT_EQ(kv.Set("job-1", 0, "k", "v").code(), absl::StatusCode::kFailedPrecondition);
  kv.SetGeneration("job-1", 0);
  ASSERT_TRUE(kv.Set("job-1", 0, "k", "old").ok());
  kv.SetGeneration("job-1", 1);
  absl::Status st = kv.Set("job-1", 0, "k", "v");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("is at generation 1, not 0"));
  // The old generation's keys are gone, not carried over.
  EXPECT_EQ(kv.Get("job-1", 1, "k", absl::ZeroDuration()).status().code(),
            absl::StatusCode::kNotFound);
  kv.EndJob("job-1");
  EXPECT_THAT(kv.Set("job-1", 1, "k", "v").message(), HasSubstr("has ended"));
}

TEST(KvStoreTest, SizeLimits) {
  KvStore kv;
  kv.SetGeneration("j", 0);
  EXPECT_EQ(kv.Set("j", 0, "", "v").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set("j", 0, std::string(kMaxKvKeyBytes + 1, 'k'), "v").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set("j", 0, "k", std::string(kMaxKvValueBytes + 1, 'v')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(kv.Set("j", 0, "k", std::string(kMaxKvValueBytes, 'v')).ok());
}

TEST(KvStoreTest, BlockingGetIsWokenByTheWriter) {
  KvStore kv;
  kv.SetGeneration("j", 2);
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = kv.Get("j", 2, "addr", absl::Hours(1)); });
  ASSERT_TRUE(kv.Set("j", 2, "addr", "10.0.0.1:1234").ok());
  reader.join();  // returns long before the hour: the Set woke it
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "10.0.0.1:1234");
}

TEST(KvStoreTest, WaitersOfADeadGenerationFail) {
  KvStore kv;
  kv.SetGeneration("j", 0);
  absl::Status st;
  std::thread waiter([&] { st = kv.Wait("j", 0, {"a", "b"}, absl::Hours(1)); });
  kv.SetGeneration("j", 1);
  waiter.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(KvStoreTest, WaitTimesOutNamingTheMissingKeys) {
  KvStore kv;
  kv.SetGeneration("j", 0);
  ASSERT_TRUE(kv.Set("j", 0, "a", "1").ok());
  absl::Status st = kv.Wait("j", 0, {"a", "b", "c"}, absl::Milliseconds(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(st.message(), HasSubstr("b, c"));
  EXPECT_THAT(st.message(), Not(HasSubstr("a, ")));
  EXPECT_TRUE(kv.Wait("j", 0, {"a"}, absl::ZeroDuration()).ok());
}

}  // namespace
}  // namespace ringmaster::coordinator
