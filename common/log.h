// Plain, timestamped log lines on stderr, shared by the trainer, agent and coordinator.
//
// Format: "2024-05-01T12:34:56.789Z INFO ringmaster-trainer: message" (UTC, milliseconds).
// Each line reaches stderr through a single write(), so lines from different threads (or
// processes sharing the stream, such as ranks under one agent) do not interleave mid-line.
#pragma once

#include <string>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringmaster {

enum class LogLevel { kInfo, kWarning, kError };

// Sets the name shown after the level; call once early in main(). Defaults to "ringmaster".
void SetLogProgramName(std::string_view name);

void LogInfo(std::string_view msg);
void LogWarning(std::string_view msg);
void LogError(std::string_view msg);

// The full line, ending in "\n", for `msg` logged at `now`. Trailing newlines in `msg` are
// dropped so that callers may pass either form. Exposed so that other writers (the progress
// reporter) produce identical lines.
std::string FormatLogLine(LogLevel level, std::string_view msg, absl::Time now = absl::Now());

// Writes `text` to stderr as one write() (retrying on EINTR and partial writes).
void WriteToStderr(std::string_view text);

}  // namespace ringmaster
