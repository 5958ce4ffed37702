// What Cluster's two source files share (cluster.cc: jobs and scheduling; cluster_agents.cc:
// registration, agent streams and log requests): the caps on request text and their checks.
// Internal to the cluster library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/absl_view.h"
#include "common/log.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::coordinator::cluster_internal {

inline bool LiveRankState(v1::RankProcessState s) {
  return s == v1::RANK_PROCESS_STATE_STARTING || s == v1::RANK_PROCESS_STATE_RUNNING;
}

inline void LogIfError(const absl::Status& st, std::string_view what) {
  if (!st.ok()) LogWarning(absl::StrCat(ToAbsl(what), ": ", st.ToString()));
}

constexpr size_t kMaxNodeNameLength = 128;

// See Cluster::CountStreamBreak. An agent reconnects at once after a stream that lived a while
// and backs off after one that broke soon (agent.h), so a healthy node reaches this only when its
// link fails several times a minute.
constexpr size_t kMaxStreamBreaks = 5;
constexpr absl::Duration kStreamBreakWindow = absl::Seconds(60);

// Caps on the free-text fields of requests (issue #20): each is stored, logged or echoed, so an
// authenticated caller must not be able to grow the database or the log by megabytes per call.
// (job_yaml has its own cap, kMaxJobYamlBytes, in ParseJobRequirements.)
constexpr size_t kMaxRequestIdBytes = 128;
constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX
constexpr size_t kMaxShortTextBytes = 256;
constexpr size_t kMaxReasonBytes = 1024;

// InvalidArgument naming `what` and the limit when `value` is longer than `max` bytes or holds a
// control character (NUL included: it would cut a path short in the trainer's C calls).
inline absl::Status CheckTextField(std::string_view what, std::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " is ", value.size(), " bytes; at most ", max, " are accepted"));
  }
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(what), " holds a control character (byte 0x",
                       absl::Hex(u, absl::kZeroPad2), "); none are accepted"));
    }
  }
  return absl::OkStatus();
}

// The job-name rule (jobspec ValidName) for node names too: they reach logs, terminals, metric
// labels and rank environments.
inline bool ValidNodeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNodeNameLength || !absl::ascii_isalnum(name[0])) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace ringmaster::coordinator::cluster_internal
