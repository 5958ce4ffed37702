// The real ringmaster-coordinator as bench_scale's child process, and what /proc and its log say
// about it: CPU time, peak RSS and threads, and when it logged a line.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/time/time.h"

namespace ringmaster::bench_scale {

struct ProcSample {
  double cpu_s = 0;  // user + system, all threads
  long hwm_kib = 0;  // VmHWM
  long rss_kib = 0;  // VmRSS
  int threads = 0;
};

// /proc/PID/stat and /proc/PID/status of `pid` (zeros where unreadable).
ProcSample SampleProc(pid_t pid);

// Starts the coordinator (its own SQLite database in `dir`, a free port it chooses and logs,
// --last-call 1s, --lost-after 600s, plaintext on loopback) and waits for its port.
class CoordinatorProcess {
 public:
  CoordinatorProcess(const std::string& binary, const std::string& dir);
  ~CoordinatorProcess() { Stop(); }

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& log_path() const { return log_path_; }

  // SIGTERM, then SIGKILL after 30 s; returns the rusage of the child.
  std::optional<rusage> Stop();

 private:
  std::string dir_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// "2024-05-01T12:34:56.789Z INFO ..." lines of the coordinator log containing `needle`: the
// time of the first one.
std::optional<absl::Time> LogTime(const std::string& path, const std::string& needle);

}  // namespace ringmaster::bench_scale
