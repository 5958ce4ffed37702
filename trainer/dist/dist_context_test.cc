// The backend factory of DistContext: which transport `distributed.backend` resolves to, with
// and without NCCL built, and that a CUDA rank alone is given what the NCCL factory builds.
#include "trainer/dist/dist_context.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
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

}  // namespace
}  // namespace ringmaster::trainer
