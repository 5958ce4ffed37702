// A Launcher for tests: records every start and signal, and ends processes when told to.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "agent/launcher.h"

namespace ringmaster::agent {

class FakeLauncher final : public Launcher {
 public:
  struct Started {
    int pid;
    LaunchSpec spec;
  };

  absl::StatusOr<int> Start(const LaunchSpec& spec) override {
    if (!fail_next_start.ok()) {
      absl::Status s = fail_next_start;
      fail_next_start = absl::OkStatus();
      return s;
    }
    const int pid = next_pid_++;
    started.push_back({pid, spec});
    running_[pid] = std::nullopt;
    if (on_start) on_start(started.back());
    return pid;
  }
  absl::Status Signal(int pid, int signo) override {
    signals.emplace_back(pid, signo);
    if (end_on_signal && running_.count(pid) && !running_[pid]) {
      ProcessExit e;
      if (signo == 15 && term_exit_code) {
        e.exit_code = *term_exit_code;
      } else {
        e.signal = signo;
      }
      running_[pid] = e;
    }
    return absl::OkStatus();
  }
  std::optional<ProcessExit> Poll(int pid) override {
    auto it = running_.find(pid);
    return it == running_.end() ? std::nullopt : it->second;
  }
  void Forget(int pid) override { running_.erase(pid); }
  bool IsStopped(int pid) override { return Running(pid) && stopped.count(pid) > 0; }

  // Test controls.
  void Exit(int pid, int code, std::string last_error_line = "") {
    running_[pid] = ProcessExit{code, 0, std::move(last_error_line)};
  }
  void Kill(int pid, int signo) { running_[pid] = ProcessExit{0, signo, ""}; }
  bool Running(int pid) const {
    auto it = running_.find(pid);
    return it != running_.end() && !it->second;
  }

  std::vector<Started> started;
  std::set<int> stopped;  // pids that IsStopped reports as stopped (SIGCONT does not clear it)
  std::vector<std::pair<int, int>> signals;  // (pid, signo)
  absl::Status fail_next_start;
  std::function<void(const Started&)> on_start;  // runs after a start is recorded
  bool end_on_signal = false;                    // a signal ends the process at once
  std::optional<int> term_exit_code;             // with end_on_signal: SIGTERM exits with this code

 private:
  int next_pid_ = 1000;
  std::map<int, std::optional<ProcessExit>> running_;
};

}  // namespace ringmaster::agent
