// Real processes (/bin/sh): output capture, exit codes, signals, exec failure.
#include "agent/process_launcher.h"

#include <signal.h>

#include <filesystem>
#include <thread>

#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Polls until the process ends; the deadline only bounds a broken test.
ProcessExit WaitFor(Launcher& l, int pid) {
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (absl::Now() < until) {
    if (std::optional<ProcessExit> e = l.Poll(pid)) return *e;
    std::this_thread::yield();
  }
  ADD_FAILURE() << "process " << pid << " did not end";
  return {};
}

class ProcessLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("process_launcher_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ProcessLauncherTest, CapturesOutputAndExitCodeWithOnlyTheGivenEnvironment) {
  ProcessLauncher l;
  LaunchSpec s;
  s.argv = {"/bin/sh", "-c", "echo \"out $RANK [$HOME]\"; echo 'x ERROR y: bad data' >&2; exit 7"};
  s.env = {{"RANK", "3"}};
  s.log_path = (dir_ / "r.log").string();
  absl::StatusOr<int> pid = l.Start(s);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ProcessExit e = WaitFor(l, *pid);
  EXPECT_EQ(e.exit_code, 7);
  EXPECT_EQ(e.signal, 0);
  EXPECT_EQ(e.last_error_line, "x ERROR y: bad data");
  EXPECT_THAT(ReadFile(s.log_path).value(), HasSubstr("out 3 []\n"));  // no HOME inherited
  l.Forget(*pid);
}

TEST_F(ProcessLauncherTest, SignalsAndReportsTheSignal) {
  ProcessLauncher l;
  LaunchSpec s;
  s.argv = {"/bin/sh", "-c", "exec sleep 600"};
  s.log_path = (dir_ / "s.log").string();
  absl::StatusOr<int> pid = l.Start(s);
  ASSERT_TRUE(pid.ok());
  EXPECT_FALSE(l.Poll(*pid).has_value());
  ASSERT_TRUE(l.Signal(*pid, SIGTERM).ok());
  ProcessExit e = WaitFor(l, *pid);
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_TRUE(l.Signal(*pid, SIGKILL).ok());  // already gone: harmless
}

TEST_F(ProcessLauncherTest, TellsAStoppedProcessFromARunningOne) {
  ProcessLauncher l;
  LaunchSpec s;
  s.argv = {"/bin/sh", "-c", "exec sleep 600"};
  s.log_path = (dir_ / "stop.log").string();
  absl::StatusOr<int> pid = l.Start(s);
  ASSERT_TRUE(pid.ok());
  EXPECT_FALSE(IsProcessStopped(*pid));
  ASSERT_TRUE(l.Signal(*pid, SIGSTOP).ok());
  // The signal is delivered asynchronously: poll (bounded) for the state change.
  bool stopped = false;
  for (int i = 0; i < 500 && !(stopped = IsProcessStopped(*pid)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(stopped);
  ASSERT_TRUE(l.Signal(*pid, SIGCONT).ok());
  for (int i = 0; i < 500 && (stopped = IsProcessStopped(*pid)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(stopped);
  EXPECT_FALSE(l.Poll(*pid).has_value());  // stopping is not ending
  ASSERT_TRUE(l.Signal(*pid, SIGKILL).ok());
  EXPECT_EQ(WaitFor(l, *pid).signal, SIGKILL);
  EXPECT_FALSE(IsProcessStopped(999999999));
}

TEST_F(ProcessLauncherTest, ExecFailureIsAnError) {
  ProcessLauncher l;
  LaunchSpec s;
  s.argv = {(dir_ / "no-such-trainer").string()};
  s.log_path = (dir_ / "n.log").string();
  absl::StatusOr<int> pid = l.Start(s);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("No such file"));
}

TEST_F(ProcessLauncherTest, ChildGetsSigtermWhenItsLauncherThreadDies) {
  // What happens to a trainer when its agent is killed: the thread that started it is gone.
  ProcessLauncher l;
  LaunchSpec s;
  s.argv = {"/bin/sh", "-c", "exec sleep 600"};
  s.log_path = (dir_ / "orphan.log").string();
  absl::StatusOr<int> pid;
  std::thread starter([&] { pid = l.Start(s); });
  starter.join();
  ASSERT_TRUE(pid.ok()) << pid.status();
  ProcessExit e = WaitFor(l, *pid);
  EXPECT_EQ(e.signal, SIGTERM);
  l.Forget(*pid);
}

}  // namespace
}  // namespace ringmaster::agent
