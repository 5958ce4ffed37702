#include "agent/process_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/rotating_log.h"
#include "common/exit_codes.h"
#include "common/file_util.h"

namespace ringmaster::agent {

struct ProcessLauncher::Child {
  int pid = -1;
  std::thread reader;
  absl::Mutex mu;
  bool drained ABSL_GUARDED_BY(mu) = false;
  std::string last_error_line ABSL_GUARDED_BY(mu);
  std::optional<int> wait_status;  // set once reaped
};

ProcessLauncher::ProcessLauncher(ProcessLauncherOptions options) : options_(options) {}

ProcessLauncher::~ProcessLauncher() {
  absl::MutexLock l(&mu_);
  for (auto& [pid, c] : children_) {
    if (!c->wait_status) {
      ::kill(pid, SIGKILL);
      int st = 0;
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
    if (c->reader.joinable()) c->reader.join();
  }
}

void ProcessLauncher::Pump(int fd, std::unique_ptr<RotatingLog> log, Child* child) {
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    (void)log->Write(std::string_view(buf, static_cast<size_t>(n)));  // a full disk loses logs only
  }
  ::close(fd);
  absl::MutexLock l(&child->mu);
  child->last_error_line = log->LastErrorLine();
  child->drained = true;
}

absl::StatusOr<int> ProcessLauncher::Start(const LaunchSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("launch: empty argv");
  auto log =
      std::make_unique<RotatingLog>(spec.log_path, options_.log_max_bytes, options_.log_keep);
  if (absl::Status s = log->Open(); !s.ok()) return s;
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe for", spec.log_path);
  int err_pipe[2];  // exec failure reporting: closes on successful exec
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return ErrnoError("pipe for", spec.log_path);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return ErrnoError("fork for", spec.argv[0]);
  }
  if (pid == 0) {
    // A child outlives no agent: when the launching process dies (even by SIGKILL), the child
    // gets SIGTERM, which a trainer answers by checkpointing with its peers and exiting.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(kExitExecFailed);  // it died before prctl took effect
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (!spec.working_dir.empty() && ::chdir(spec.working_dir.c_str()) != 0) {
      const int e = errno;
      (void)!::write(err_pipe[1], &e, sizeof e);
      ::_exit(kExitExecFailed);
    }
    ::execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!::write(err_pipe[1], &e, sizeof e);
    ::_exit(kExitExecFailed);
  }
  ::close(out[1]);
  ::close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  while ((n = ::read(err_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    ::close(out[0]);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", spec.argv[0], ": ", std::strerror(child_errno)));
  }
  auto child = std::make_unique<Child>();
  child->pid = pid;
  child->reader = std::thread(Pump, out[0], std::move(log), child.get());
  absl::MutexLock l(&mu_);
  children_[pid] = std::move(child);
  return static_cast<int>(pid);
}

absl::Status ProcessLauncher::Signal(int pid, int signo) {
  absl::MutexLock l(&mu_);
  auto it = children_.find(pid);
  if (it == children_.end()) return absl::NotFoundError(absl::StrCat("no process ", pid));
  if (it->second->wait_status) return absl::OkStatus();  // already gone
  if (::kill(pid, signo) != 0 && errno != ESRCH) {
    return absl::InternalError(absl::StrCat("kill ", pid, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::optional<ProcessExit> ProcessLauncher::Poll(int pid) {
  absl::MutexLock l(&mu_);
  auto it = children_.find(pid);
  if (it == children_.end()) return std::nullopt;
  Child& c = *it->second;
  if (!c.wait_status) {
    int st = 0;
    pid_t r;
    while ((r = ::waitpid(pid, &st, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r == 0) return std::nullopt;
    c.wait_status = r == pid ? st : 0;
  }
  {
    // The trainer does not fork, so its pipe closes when it exits; the reader finishes soon after.
    absl::MutexLock cl(&c.mu);
    if (!c.drained) return std::nullopt;
  }
  if (c.reader.joinable()) c.reader.join();
  ProcessExit e;
  const int st = *c.wait_status;
  if (WIFSIGNALED(st)) {
    e.signal = WTERMSIG(st);
  } else {
    e.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  absl::MutexLock cl(&c.mu);
  e.last_error_line = c.last_error_line;
  return e;
}

void ProcessLauncher::Forget(int pid) {
  std::unique_ptr<Child> c;
  {
    absl::MutexLock l(&mu_);
    auto it = children_.find(pid);
    if (it == children_.end() || !it->second->wait_status) return;
    c = std::move(it->second);
    children_.erase(it);
  }
  if (c->reader.joinable()) c->reader.join();
}

// True when /proc says the process is stopped by a signal or a tracer (state T or t).
bool IsProcessStopped(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses, so look after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state == 'T' || state == 't';
}

}  // namespace ringmaster::agent
