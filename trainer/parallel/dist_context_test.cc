// The backend factory of DistContext: which transport `distributed.backend` resolves to, with
// and without NCCL built, and that a CUDA rank alone is given what the NCCL factory builds.
// The rendezvous: a peer that arrives after the collective timeout is still met, within the
// rendezvous timeout; one that never arrives is named.
#include "trainer/parallel/dist_context.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "trainer/comm/local_communicator.h"

namespace ringmaster::trainer {
namespace {

TEST(CommBackendTest, AutoIsNcclOnlyForACudaRankWithNcclBuilt) {
  EXPECT_EQ(*ResolveCommBackend(CommBackend::kAuto, /*cuda_rank=*/true, /*nccl_built=*/true),
            CommBackend::kNccl);
  EXPECT_EQ(*ResolveCommBackend(CommBackend::kAuto, true, false), CommBackend::kGloo);
  EXPECT_EQ(*ResolveCommBackend(CommBackend::kAuto, false, true), CommBackend::kGloo);
  EXPECT_EQ(*ResolveCommBackend(CommBackend::kAuto, false, false), CommBackend::kGloo);
}

TEST(CommBackendTest, GlooIsGlooEverywhere) {
  for (bool cuda : {false, true}) {
    for (bool built : {false, true}) {
      EXPECT_EQ(*ResolveCommBackend(CommBackend::kGloo, cuda, built), CommBackend::kGloo);
    }
  }
}

TEST(CommBackendTest, NcclNeedsNcclBuiltAndACudaRank) {
  EXPECT_EQ(*ResolveCommBackend(CommBackend::kNccl, true, true), CommBackend::kNccl);

  absl::StatusOr<CommBackend> unbuilt = ResolveCommBackend(CommBackend::kNccl, true, false);
  EXPECT_EQ(unbuilt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(unbuilt.status().message(), "distributed.backend: nccl"))
      << unbuilt.status();
  EXPECT_TRUE(absl::StrContains(unbuilt.status().message(), "built without NCCL"))
      << unbuilt.status();

  absl::StatusOr<CommBackend> cpu = ResolveCommBackend(CommBackend::kNccl, false, true);
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(cpu.status().message(), "distributed.backend: nccl"))
      << cpu.status();
  EXPECT_TRUE(absl::StrContains(cpu.status().message(), "CPU")) << cpu.status();
}

// A stand-in for NcclCommunicator::Create that records its calls and builds a world of one.
struct FakeNccl {
  static inline int calls = 0;
  static inline int last_device = -2;
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(Store&, int rank, int size,
                                                              int device, absl::Duration) {
    ++calls;
    last_device = device;
    if (rank != 0 || size != 1) return absl::InternalError("FakeNccl: world of one only");
    return std::unique_ptr<Communicator>(new LocalCommunicator());
  }
};

TEST(DistContextTest, ACudaRankAloneGetsWhatTheNcclFactoryBuilds) {
  FakeNccl::calls = 0;
  CommChoice comm;
  comm.backend = CommBackend::kAuto;
  comm.cuda_device = 3;
  comm.nccl = &FakeNccl::Create;
  absl::StatusOr<std::unique_ptr<DistContext>> c =
      DistContext::Create(DistEnv(), /*node_groups=*/true, absl::Seconds(5), nullptr, comm);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->backend(), CommBackend::kNccl);
  EXPECT_EQ(FakeNccl::calls, 3);  // world, intra, inter
  EXPECT_EQ(FakeNccl::last_device, 3);
  ASSERT_NE((*c)->world(), nullptr);
  EXPECT_TRUE((*c)->world()->Barrier().ok());
}

TEST(DistContextTest, ACpuRankAloneGetsTheLocalCommunicator) {
  FakeNccl::calls = 0;
  CommChoice comm;
  comm.nccl = &FakeNccl::Create;  // built, but the rank is on the CPU
  absl::StatusOr<std::unique_ptr<DistContext>> c =
      DistContext::Create(DistEnv(), false, absl::Seconds(5), nullptr, comm);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->backend(), CommBackend::kGloo);
  EXPECT_EQ(FakeNccl::calls, 0);
  EXPECT_NE(dynamic_cast<LocalCommunicator*>((*c)->world()), nullptr);
}

TEST(DistContextTest, NcclWithoutNcclBuiltFailsNamingTheSetting) {
  CommChoice comm;
  comm.backend = CommBackend::kNccl;
  comm.cuda_device = 0;  // no factory: built without NCCL
  absl::StatusOr<std::unique_ptr<DistContext>> c =
      DistContext::Create(DistEnv(), false, absl::Seconds(5), nullptr, comm);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "distributed.backend")) << c.status();
}

// Two ranks rendezvousing through a fresh directory store over loopback Gloo.
class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("dist_context_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DistEnv Rank(int rank, absl::Duration rendezvous) const {
    DistEnv env;
    env.distributed = true;
    env.rank = rank;
    env.world_size = 2;
    env.local_world_size = 2;
    env.store_dir = dir_.string();
    env.iface = "127.0.0.1";
    env.rendezvous_timeout = rendezvous;
    return env;
  }

  std::filesystem::path dir_;
};

// A restarted generation's peer may start late (its agent is still stopping the old ranks):
// the first rank waits past the collective timeout for it instead of failing the generation.
TEST_F(RendezvousTest, APeerLaterThanTheCollectiveTimeoutIsMet) {
  const absl::Duration collective = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<DistContext>> first;
  std::thread t(
      [&] { first = DistContext::Create(Rank(0, absl::Seconds(60)), false, collective); });
  // Rank 1 comes once rank 0 has waited twice the collective timeout.
  while (absl::Now() - start < 2 * collective)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  absl::StatusOr<std::unique_ptr<DistContext>> second =
      DistContext::Create(Rank(1, absl::Seconds(60)), false, collective);
  t.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  // The transports work: both sides of an all-reduce.
  std::vector<float> a = {1, 2}, b = {10, 20};
  std::thread t2([&] { EXPECT_TRUE((*first)->world()->AllReduceSum(a.data(), 2).ok()); });
  EXPECT_TRUE((*second)->world()->AllReduceSum(b.data(), 2).ok());
  t2.join();
  EXPECT_EQ(a, (std::vector<float>{11, 22}));
  EXPECT_EQ(b, (std::vector<float>{11, 22}));
}

TEST_F(RendezvousTest, APeerThatNeverArrivesIsNamedAfterTheRendezvousTimeout) {
  absl::StatusOr<std::unique_ptr<DistContext>> alone =
      DistContext::Create(Rank(0, absl::Milliseconds(600)), false, absl::Milliseconds(200));
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded) << alone.status();
  EXPECT_TRUE(absl::StrContains(alone.status().message(), "rendezvous of rank 0 of 2"))
      << alone.status();
  EXPECT_TRUE(absl::StrContains(alone.status().message(), "arrived/1")) << alone.status();
  EXPECT_TRUE(absl::StrContains(alone.status().message(), "RINGMASTER_RENDEZVOUS_TIMEOUT_S"))
      << alone.status();
}

}  // namespace
}  // namespace ringmaster::trainer
