// Starting and supervising trainer processes. The agent decides what to run (only its own
// configured trainer binary, see agent.h) and when to stop it; a Launcher only starts a process,
// signals it and reports how it ended. ProcessLauncher is the real one (fork/execve, output to a
// rotating log file); FakeLauncher (fake_launcher.h) records calls for tests.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::agent {

struct LaunchSpec {
  std::vector<std::string> argv;           // argv[0] is the binary's path
  std::map<std::string, std::string> env;  // the whole environment of the child
  std::string log_path;                    // stdout and stderr, rotated
  std::string working_dir;                 // empty: the agent's
};

struct ProcessExit {
  int exit_code = 0;  // when signal == 0
  int signal = 0;     // the signal that killed it, or 0
  std::string last_error_line;
};

// Thread-compatible: the agent calls it from one thread.
class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts a process; returns its pid (an opaque handle for the fake).
  virtual absl::StatusOr<int> Start(const LaunchSpec& spec) = 0;
  // Sends `signo` to a started process that has not been reported as ended.
  virtual absl::Status Signal(int pid, int signo) = 0;
  // Nullopt while it runs; its end once (reaped, its output drained), and again on later calls.
  virtual std::optional<ProcessExit> Poll(int pid) = 0;
  // Forgets an ended process.
  virtual void Forget(int pid) = 0;
  // True while a started process is stopped (SIGSTOP, a tracer): alive, but it cannot run.
  virtual bool IsStopped(int pid) = 0;
};

}  // namespace ringmaster::agent
