// ResolveRankSettings: precedence (flag > plan > YAML), `auto` on the CPU and on a GPU (a fake
// probe), plans and jobs the hardware cannot run, and bad plan variables refused by name.
#include "trainer/parallel/rank_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ringmaster::trainer {
namespace {

using jobspec::Backend;
using jobspec::Compression;
using jobspec::Device;
using jobspec::Precision;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

// A machine with one GPU of compute capability `cc` (a real one unless `emulated`), counting
// how often it is probed.
struct FakeHost {
  int cc = 90;
  bool emulated = false;
  bool engine = true;
  int count = 1;
  int probes = 0;
  RankHost host(bool nccl = true) {
    return RankHost{[this] {
                      ++probes;
                      return GpuProbe{engine, count, emulated, "Fake GPU", cc, ""};
                    },
                    nccl};
  }
};

JobSpec Job(Device device, Precision precision = Precision::kAuto) {
  JobSpec job;
  job.source = "job.yaml";
  job.train.device = device;
  job.train.precision = precision;
  return job;
}

absl::StatusOr<RankSettings> Resolve(const JobSpec& job, const DistEnv& env, RankHost host,
                                     RankFlags flags = {}, TrainerEnv trainer_env = {}) {
  return ResolveRankSettings(job, env, trainer_env, flags, host);
}

TEST(RankSettingsTest, DeviceIsTheFlagsElseThePlansElseTheJobs) {
  FakeHost gpu;
  DistEnv env;
  // The job alone.
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kCuda), env, gpu.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCuda);
  EXPECT_EQ(s->cuda_device, 0);
  // The plan over the job.
  env.device = Device::kCpu;
  s = Resolve(Job(Device::kCuda), env, gpu.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCpu);
  EXPECT_EQ(s->cuda_device, -1);
  // The flag over the plan.
  s = Resolve(Job(Device::kCpu), env, gpu.host(), RankFlags{Device::kCuda});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCuda);
}

TEST(RankSettingsTest, ThePlanResolvesAutoPrecisionAndSetsTheCodec) {
  FakeHost gpu;
  JobSpec job = Job(Device::kCuda);
  job.distributed.compression = Compression::kAuto;
  DistEnv env;
  env.precision = Precision::kFp16;  // the plan's, though the probe would say bf16
  env.compression = Compression::kInt8;
  env.rank_weights = {1.5, 0.5};
  env.world_size = 2;
  env.local_world_size = 2;
  absl::StatusOr<RankSettings> s = Resolve(job, env, gpu.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->precision, Precision::kFp16);
  EXPECT_EQ(s->compression, Compression::kInt8);
  EXPECT_EQ(s->backend, Backend::kNccl);
  EXPECT_EQ(s->rank_weights, (std::vector<double>{1.5, 0.5}));
  EXPECT_EQ(s->procs_per_node, 2);
  ApplyRankSettings(*s, &job);
  EXPECT_EQ(job.distributed.compression, Compression::kInt8);
  // Unset: the job's codec stands.
  job.distributed.compression = Compression::kPowerSgd;
  s = Resolve(job, DistEnv{}, gpu.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->compression, Compression::kPowerSgd);
}

TEST(RankSettingsTest, AnExplicitJobPrecisionStandsOverThePlan) {
  FakeHost gpu;
  DistEnv env;
  env.precision = Precision::kBf16;
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kCuda, Precision::kFp32), env, gpu.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->precision, Precision::kFp32);
  // A half-precision job on a CPU rank gets fp32 in the plan; the job's own setting is still
  // refused, rather than silently run in fp32.
  env.precision = Precision::kFp32;
  s = Resolve(Job(Device::kCpu, Precision::kBf16), env, gpu.host());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr("job.yaml: train.precision: bf16 needs train.device: cuda"),
                    HasSubstr("computes in fp32")));
}

TEST(RankSettingsTest, AutoOnAGpuTakesItAndPicksPrecisionByGeneration) {
  for (auto [cc, want] : {std::pair{90, Precision::kBf16}, std::pair{75, Precision::kFp16},
                          std::pair{61, Precision::kFp32}}) {
    FakeHost gpu;
    gpu.cc = cc;
    absl::StatusOr<RankSettings> s = Resolve(Job(Device::kAuto), DistEnv{}, gpu.host());
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->device, Device::kCuda) << cc;
    EXPECT_EQ(s->precision, want) << cc;
    EXPECT_THAT(s->notes, Contains(HasSubstr("train.device auto: cuda (Fake GPU")));
    EXPECT_THAT(s->notes, Contains(HasSubstr(absl::StrCat(
                              "train.precision auto: ", std::string(jobspec::SettingName(want)),
                              " (Fake GPU, sm_", cc, ")"))));
  }
}

TEST(RankSettingsTest, AutoWithoutAGpuIsTheCpuInFp32AndAnExplicitCpuNeverProbes) {
  FakeHost none;
  none.count = 0;
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kAuto), DistEnv{}, none.host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCpu);
  EXPECT_EQ(s->precision, Precision::kFp32);
  EXPECT_EQ(s->backend, Backend::kGloo);
  EXPECT_THAT(s->notes, Contains(HasSubstr("train.device auto: cpu (no CUDA device visible")));
  // A build without the CUDA engine (no probe at all) is the CPU too.
  s = Resolve(Job(Device::kAuto), DistEnv{}, RankHost{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCpu);
  // Several ranks without NCCL: the CPU, though a GPU is visible.
  FakeHost gpu;
  DistEnv two;
  two.world_size = 2;
  s = Resolve(Job(Device::kAuto), two, gpu.host(/*nccl=*/false));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, Device::kCpu);
  FakeHost counted;
  ASSERT_TRUE(Resolve(Job(Device::kCpu), DistEnv{}, counted.host()).ok());
  EXPECT_EQ(counted.probes, 0);
}

TEST(RankSettingsTest, HalfPrecisionPlannedForACpuRankFailsNamingTheVariableAndTheDevice) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    DistEnv env;
    env.precision = p;
    env.device = Device::kCpu;
    FakeHost gpu;
    absl::StatusOr<RankSettings> s = Resolve(Job(Device::kAuto), env, gpu.host());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()),
                AllOf(HasSubstr(std::string("RINGMASTER_PRECISION=") +
                                std::string(jobspec::SettingName(p))),
                      HasSubstr("train.device: cpu"), HasSubstr("fp32")));
  }
  DistEnv env;
  env.precision = Precision::kFp32;  // what the planner gives every CPU rank
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kCpu), env, RankHost{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->precision, Precision::kFp32);
}

TEST(RankSettingsTest, CudaTheBuildOrMachineCannotRunIsRefused) {
  // No CUDA engine in this build.
  FakeHost no_engine;
  no_engine.engine = false;
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kCuda), DistEnv{}, no_engine.host());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("job.yaml: train.device: cuda is not available in this build"));
  // The emulator's device, unless a test opts in.
  FakeHost emu;
  emu.emulated = true;
  s = Resolve(Job(Device::kCuda), DistEnv{}, emu.host());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("RINGMASTER_EMULATED_CUDA_OK=1"));
  TrainerEnv opted_in;
  opted_in.emulated_cuda_ok = true;
  s = Resolve(Job(Device::kCuda), DistEnv{}, emu.host(), {}, opted_in);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->emulated_cuda);
  // Several CUDA ranks over gloo; nccl on a CPU rank.
  DistEnv two;
  two.world_size = 2;
  JobSpec job = Job(Device::kCuda);
  job.distributed.backend = Backend::kGloo;
  FakeHost gpu;
  s = Resolve(job, two, gpu.host());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("job.yaml: distributed.backend: gloo cannot carry"));
  job = Job(Device::kCpu);
  job.distributed.backend = Backend::kNccl;
  s = Resolve(job, two, gpu.host());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("job.yaml: distributed.backend: nccl needs a rank on a CUDA device"));
}

TEST(RankSettingsTest, TheTrainersVariablesReachTheSettingsAndBadOnesAreNamed) {
  std::map<std::string, std::string> vars = {{"RINGMASTER_SLOWDOWN", "2.5"},
                                             {"RINGMASTER_SLOW_LINK_GBITS", "1"},
                                             {"RINGMASTER_TEST_POISON_GRAD_STEP", "3"},
                                             {"RINGMASTER_ALLOWED_ROOT", "/srv/jobs"},
                                             {"RINGMASTER_METRICS_PORT", "9400"}};
  auto getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  absl::StatusOr<TrainerEnv> t = ParseTrainerEnv(getenv);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->allowed_root, "/srv/jobs");
  EXPECT_EQ(t->metrics_port, 9400);
  EXPECT_EQ(t->metrics_host, "127.0.0.1");
  absl::StatusOr<RankSettings> s = Resolve(Job(Device::kCpu), DistEnv{}, RankHost{}, {}, *t);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->slowdown, 2.5);
  EXPECT_EQ(s->slow_link_gbits, 1.0);
  EXPECT_EQ(s->poison_grad_step, 3);
  for (auto [name, bad, says] :
       {std::tuple{"RINGMASTER_SLOWDOWN", "0.5", "RINGMASTER_SLOWDOWN='0.5': expected a factor"},
        std::tuple{"RINGMASTER_SLOW_LINK_GBITS", "fast",
                   "RINGMASTER_SLOW_LINK_GBITS=fast is not a number of Gbit/s"},
        std::tuple{"RINGMASTER_METRICS_PORT", "70000",
                   "RINGMASTER_METRICS_PORT=70000 is not a port number"},
        std::tuple{"RINGMASTER_TEST_POISON_GRAD_STEP", "0",
                   "RINGMASTER_TEST_POISON_GRAD_STEP: expected a step >= 1, got '0'"}}) {
    std::map<std::string, std::string> saved = vars;
    vars[name] = bad;
    absl::StatusOr<TrainerEnv> b = ParseTrainerEnv(getenv);
    ASSERT_FALSE(b.ok()) << name;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr(says));
    vars = saved;
  }
}

TEST(RankSettingsTest, BadPlanVariablesAreRefusedNamingTheVariable) {
  std::map<std::string, std::string> vars = {
      {"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  for (auto [name, bad] :
       {std::pair{"RINGMASTER_RANK_WEIGHTS", "1,zero"}, std::pair{"RINGMASTER_RANK_WEIGHTS", "1*3"},
        std::pair{"RINGMASTER_PRECISION", "fp64"}, std::pair{"RINGMASTER_DEVICE", "tpu"},
        std::pair{"RINGMASTER_COMPRESSION", "zip"}}) {
    vars[name] = bad;
    absl::StatusOr<DistEnv> env = ParseDistEnv(getenv);
    ASSERT_FALSE(env.ok()) << name << "=" << bad;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(env.status().message()), HasSubstr(absl::StrCat(name, "=", bad)));
    vars.erase(name);
  }
  vars["RINGMASTER_RANK_WEIGHTS"] = "3,1";
  absl::StatusOr<DistEnv> env = ParseDistEnv(getenv);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank_weights, (std::vector<double>{3, 1}));
}

}  // namespace
}  // namespace ringmaster::trainer
