// ApplyRankPlan: the coordinator's per-rank settings as the trainer's input.
#include "trainer/parallel/rank_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace ringmaster::trainer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(RankPlanTest, UnsetLeavesTheJobAsItIs) {
  JobSpec job;
  job.train.precision = Precision::kAuto;
  job.distributed.compression = Compression::kPowerSgd;
  ASSERT_TRUE(ApplyRankPlan(DistEnv{}, &job).ok());
  EXPECT_EQ(job.train.precision, Precision::kAuto);
  EXPECT_EQ(job.distributed.compression, Compression::kPowerSgd);
}

TEST(RankPlanTest, ThePlanResolvesAutoAndSetsTheCodec) {
  JobSpec job;
  job.train.device = Device::kCuda;
  job.train.precision = Precision::kAuto;
  job.distributed.compression = Compression::kAuto;
  DistEnv env;
  env.precision = Precision::kBf16;
  env.compression = Compression::kInt8;
  ASSERT_TRUE(ApplyRankPlan(env, &job).ok());
  EXPECT_EQ(job.train.precision, Precision::kBf16);
  EXPECT_EQ(job.distributed.compression, Compression::kInt8);
}

TEST(RankPlanTest, HalfPrecisionOnACpuRankFailsNamingTheVariableAndTheDevice) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    JobSpec job;  // train.device: cpu
    DistEnv env;
    env.precision = p;
    absl::Status st = ApplyRankPlan(env, &job);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(st.message()),
                AllOf(HasSubstr(std::string("RINGMASTER_PRECISION=") +
                                std::string(jobspec::SettingName(p))),
                      HasSubstr("train.device: cpu"), HasSubstr("fp32")));
  }
  JobSpec job;
  DistEnv env;
  env.precision = Precision::kFp32;  // what the planner gives every CPU rank
  EXPECT_TRUE(ApplyRankPlan(env, &job).ok());
  EXPECT_EQ(job.train.precision, Precision::kFp32);
}

TEST(RankPlanTest, AnExplicitJobPrecisionIsKeptForTheTrainerToJudge) {
  // A half-precision job on CPU ranks gets fp32 in the plan; the trainer then still refuses the
  // job's own setting (Trainer::Create), rather than silently running it in fp32.
  JobSpec job;
  job.train.precision = Precision::kBf16;
  DistEnv env;
  env.precision = Precision::kFp32;
  ASSERT_TRUE(ApplyRankPlan(env, &job).ok());
  EXPECT_EQ(job.train.precision, Precision::kBf16);
}

}  // namespace
}  // namespace ringmaster::trainer
