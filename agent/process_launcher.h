// The real Launcher: fork + execve with a clean environment (only LaunchSpec::env), stdout and
// stderr through a pipe into a RotatingLog (one reader thread per process), reaping with
// waitpid. The child runs in its own process group so that a Ctrl-C at the agent's terminal does
// not reach the trainers directly: the agent stops them itself (SIGTERM, then SIGKILL). A child
// gets SIGTERM when the thread that started it dies (PR_SET_PDEATHSIG), so an agent killed with
// SIGKILL leaves no trainer behind: call Start from a thread that lives as long as the children.
#pragma once

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/launcher.h"

namespace ringmaster::agent {

class RotatingLog;

// True when /proc says process `pid` is stopped by a signal (SIGSTOP) or a tracer: alive, but
// it cannot run. False when it runs, sleeps or does not exist.
bool IsProcessStopped(int pid);

struct ProcessLauncherOptions {
  size_t log_max_bytes = size_t{64} << 20;
  int log_keep = 3;
};

class ProcessLauncher final : public Launcher {
 public:
  explicit ProcessLauncher(ProcessLauncherOptions options = {});
  // Kills (SIGKILL) and reaps every process still running.
  ~ProcessLauncher() override;

  absl::StatusOr<int> Start(const LaunchSpec& spec) override;
  absl::Status Signal(int pid, int signo) override;
  std::optional<ProcessExit> Poll(int pid) override;
  void Forget(int pid) override;
  bool IsStopped(int pid) override { return IsProcessStopped(pid); }

 private:
  struct Child;
  // Copies a child's output into its log until EOF (every writer closed).
  static void Pump(int fd, std::unique_ptr<RotatingLog> log, Child* child);

  ProcessLauncherOptions options_;
  absl::Mutex mu_;
  std::map<int, std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::agent
