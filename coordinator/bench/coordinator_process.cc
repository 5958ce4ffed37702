#include "coordinator/bench/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/bench/bench_common.h"

namespace ringmaster::bench_scale {

ProcSample SampleProc(pid_t pid) {
  ProcSample s;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  // Fields after the command name, which is in parentheses and may contain spaces.
  const size_t close = line.rfind(')');
  if (close != std::string::npos) {
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    // f[0] is field 3 (state); utime is field 14, stime field 15.
    long utime = 0, stime = 0;
    if (f.size() > 13 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime)) {
      s.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    auto field = [&](std::string_view name, long* out) {
      if (line.rfind(name, 0) != 0) return;
      std::string v(line.substr(name.size()));
      v.erase(std::remove_if(v.begin(), v.end(), [](char c) { return !std::isdigit(c); }), v.end());
      (void)absl::SimpleAtoi(v, out);
    };
    long threads = 0;
    field("VmHWM:", &s.hwm_kib);
    field("VmRSS:", &s.rss_kib);
    field("Threads:", &threads);
    if (threads > 0) s.threads = static_cast<int>(threads);
  }
  return s;
}

CoordinatorProcess::CoordinatorProcess(const std::string& binary, const std::string& dir)
    : dir_(dir) {
  log_path_ = dir + "/coordinator.log";
  const std::string db = dir + "/jobs.db";
  pid_ = fork();
  if (pid_ < 0) Die("fork failed");
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--db", db.c_str(),
          "--last-call", "1s", "--lost-after", "600s", "--join-timeout", "600s",
          "--insecure-loopback",  // plaintext, as the simulated agents speak, on 127.0.0.1 only
          // Thousands of simulated agents register from one host at once: no per-host limits.
          "--register-rate", "0", "--max-streams-per-peer", "0", static_cast<char*>(nullptr));
    std::perror("exec ringmaster-coordinator");
    _exit(127);
  }
  // The coordinator logs "listening on 127.0.0.1:0 (port N, ...": the port it bound.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    std::ifstream log(log_path_);
    std::string line;
    while (std::getline(log, line)) {
      const size_t at = line.find("(port ");
      if (line.find("listening on") != std::string::npos && at != std::string::npos) {
        const size_t end = line.find(',', at);
        if (absl::SimpleAtoi(line.substr(at + 6, end - at - 6), &port_)) return;
      }
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      Die("ringmaster-coordinator exited at startup; see " + log_path_);
    }
    usleep(20000);
  }
  Die("ringmaster-coordinator did not report its port; see " + log_path_);
}

std::optional<rusage> CoordinatorProcess::Stop() {
  if (pid_ <= 0) return std::nullopt;
  kill(pid_, SIGTERM);
  rusage ru{};
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (true) {
    pid_t r = wait4(pid_, &status, WNOHANG, &ru);
    if (r == pid_) break;
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      wait4(pid_, &status, 0, &ru);
      break;
    }
    usleep(20000);
  }
  pid_ = -1;
  return ru;
}

// "2024-05-01T12:34:56.789Z INFO ..." lines of the coordinator log containing `needle`: the
// time of the first one.
std::optional<absl::Time> LogTime(const std::string& path, const std::string& needle) {
  std::ifstream log(path);
  std::string line;
  while (std::getline(log, line)) {
    if (line.find(needle) == std::string::npos) continue;
    absl::Time t;
    std::string err;
    if (absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", line.substr(0, line.find(' ')), &t, &err)) {
      return t;
    }
  }
  return std::nullopt;
}

}  // namespace ringmaster::bench_scale
