#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log_escape.h"

namespace ringmaster {
namespace {

std::mutex& NameMutex() {
  static std::mutex mu;
  return mu;
}

std::string& ProgramName() {
  static std::string* name = new std::string("ringmaster");  // never destroyed: logging may
  return *name;                                              // run during static teardown
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

std::atomic<bool>& EscapeControl() {
  static std::atomic<bool> on{false};
  return on;
}

void Log(LogLevel level, std::string_view msg) {
  if (!EscapeControl().load(std::memory_order_relaxed)) {
    WriteToStderr(FormatLogLine(level, msg));
    return;
  }
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.remove_suffix(1);
  WriteToStderr(FormatLogLine(level, EscapeControlCharacters(msg)));
}

}  // namespace

void SetLogEscapeControlCharacters(bool on) { EscapeControl().store(on); }

void SetLogProgramName(std::string_view name) {
  std::lock_guard<std::mutex> lock(NameMutex());
  ProgramName() = std::string(name);
}

std::string FormatLogLine(LogLevel level, std::string_view msg, absl::Time now) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.remove_suffix(1);
  std::string program;
  {
    std::lock_guard<std::mutex> lock(NameMutex());
    program = ProgramName();
  }
  return absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone()), " ",
                      LevelName(level), " ", program, ": ",
                      absl::string_view(msg.data(), msg.size()), "\n");
}

void WriteToStderr(std::string_view text) {
  // One write() normally suffices; the loop only covers signals and full pipes.
  while (!text.empty()) {
    ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing stderr
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void LogInfo(std::string_view msg) { Log(LogLevel::kInfo, msg); }
void LogWarning(std::string_view msg) { Log(LogLevel::kWarning, msg); }
void LogError(std::string_view msg) { Log(LogLevel::kError, msg); }

}  // namespace ringmaster
