#include "agent/throughput_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "agent/fake_launcher.h"
#include "common/file_util.h"

namespace ringmaster::agent {
namespace {

class ThroughputProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/probe_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.trainer_path = dir_ + "/fake-trainer";
    std::ofstream(opts_.trainer_path) << "#!/bin/sh\n";
    opts_.work_dir = dir_;
    opts_.device = "cpu:2";
    opts_.env = {{"OMP_NUM_THREADS", "2"}};
    opts_.poll_interval = absl::Milliseconds(1);
    // The fake "process" writes `output_` to its log and exits with `code_`.
    launcher_.on_start = [this](const FakeLauncher::Started& s) {
      std::ofstream(s.spec.log_path) << output_;
      if (code_ >= 0) launcher_.Exit(s.pid, code_, code_ ? "error: boom" : "");
    };
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string dir_;
  ThroughputProbeOptions opts_;
  FakeLauncher launcher_;
  std::string output_ =
      "some log line\n{\"device\":\"cpu\",\"samples_per_second\":123.5,\"steps\":9}\n";
  int code_ = 0;  // -1: never exits
};

TEST_F(ThroughputProbeTest, RunsTheTrainersProbeAndParsesItsLastLine) {
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->samples_per_second, 123.5);
  EXPECT_FALSE(m->cached);
  ASSERT_EQ(launcher_.started.size(), 1u);
  EXPECT_EQ(launcher_.started[0].spec.argv,
            (std::vector<std::string>{opts_.trainer_path, "probe"}));
  EXPECT_EQ(launcher_.started[0].spec.env.at("OMP_NUM_THREADS"), "2");
}

TEST_F(ThroughputProbeTest, SecondCallUsesTheCacheUntilTheKeyChanges) {
  ASSERT_TRUE(MeasureTrainerThroughput(opts_, launcher_).ok());
  output_ = "{\"samples_per_second\":50}\n";
  absl::StatusOr<ThroughputMeasurement> again = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_DOUBLE_EQ(again->samples_per_second, 123.5);
  EXPECT_EQ(launcher_.started.size(), 1u);

  opts_.env["RINGMASTER_SLOWDOWN"] = "3";  // another "device": measure again
  absl::StatusOr<ThroughputMeasurement> slowed = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_TRUE(slowed.ok()) << slowed.status();
  EXPECT_FALSE(slowed->cached);
  EXPECT_DOUBLE_EQ(slowed->samples_per_second, 50);
  EXPECT_EQ(launcher_.started.size(), 2u);

  opts_.device = "1xA100";
  ASSERT_TRUE(MeasureTrainerThroughput(opts_, launcher_).ok());
  EXPECT_EQ(launcher_.started.size(), 3u);
}

TEST_F(ThroughputProbeTest, DamagedCacheIsMeasuredAgain) {
  ASSERT_TRUE(MeasureTrainerThroughput(opts_, launcher_).ok());
  std::ofstream(dir_ + "/throughput.json") << "{\"key\": tru";
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->cached);
  EXPECT_EQ(launcher_.started.size(), 2u);
}

TEST_F(ThroughputProbeTest, FailedProbeNamesTheTrainerAndItsError) {
  code_ = 1;
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(opts_.trainer_path), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("exit status 1: error: boom"), std::string::npos)
      << m.status();
  EXPECT_FALSE(ReadFile(dir_ + "/throughput.json").ok()) << "a failure must not be cached";
}

TEST_F(ThroughputProbeTest, OutputWithoutAFigureIsAnError) {
  output_ = "hello\n{\"samples_per_second\": \"fast\"}\n";
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no samples_per_second"), std::string::npos) << m.status();
}

TEST_F(ThroughputProbeTest, HungProbeIsKilledAtTheTimeout) {
  code_ = -1;
  launcher_.end_on_signal = true;
  opts_.timeout = absl::Milliseconds(30);
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_EQ(launcher_.signals.size(), 1u);
  EXPECT_EQ(launcher_.signals[0].second, SIGKILL);
}

TEST_F(ThroughputProbeTest, MissingTrainerIsAnError) {
  opts_.trainer_path = dir_ + "/nope";
  absl::StatusOr<ThroughputMeasurement> m = MeasureTrainerThroughput(opts_, launcher_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nope"), std::string::npos);
  EXPECT_TRUE(launcher_.started.empty());
}

}  // namespace
}  // namespace ringmaster::agent
