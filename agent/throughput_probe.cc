#include "agent/throughput_probe.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace ringmaster::agent {
namespace {

constexpr size_t kMaxProbeOutput = 1 << 20;

absl::StatusOr<std::string> CacheKey(const ThroughputProbeOptions& o) {
  struct stat st {};
  if (::stat(o.trainer_path.c_str(), &st) != 0) {
    return ErrnoError("throughput probe: stat", o.trainer_path);
  }
  auto env = [&](const char* name) {
    auto it = o.env.find(name);
    return it == o.env.end() ? std::string() : it->second;
  };
  return absl::StrCat(o.trainer_path, "|", st.st_size, "|", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, "|", o.device, "|slowdown=", env("RINGMASTER_SLOWDOWN"),
                      "|omp=", env("OMP_NUM_THREADS"));
}

// The figure from the probe's output: its last line that parses as JSON with the field.
absl::StatusOr<double> ParseProbeOutput(const std::string& out, const std::string& where) {
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    nlohmann::json j = nlohmann::json::parse(*it, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("samples_per_second") && j["samples_per_second"].is_number()) {
      const double v = j["samples_per_second"].get<double>();
      if (v > 0) return v;
      return absl::InternalError(absl::StrCat(where, ": samples_per_second ", v, " is not > 0"));
    }
  }
  return absl::InternalError(absl::StrCat(where, ": no samples_per_second line in its output"));
}

}  // namespace

absl::StatusOr<ThroughputMeasurement> MeasureTrainerThroughput(const ThroughputProbeOptions& o,
                                                               Launcher& launcher) {
  absl::StatusOr<std::string> key = CacheKey(o);
  if (!key.ok()) return key.status();
  const std::string cache_path = o.work_dir + "/throughput.json";
  if (absl::StatusOr<std::string> cached = ReadFile(cache_path, 64 * 1024); cached.ok()) {
    nlohmann::json j = nlohmann::json::parse(*cached, nullptr, false);
    if (j.is_object() && j.value("key", "") == *key && j.contains("samples_per_second") &&
        j["samples_per_second"].is_number() && j["samples_per_second"].get<double>() > 0) {
      return ThroughputMeasurement{j["samples_per_second"].get<double>(), true};
    }
  }  // missing, damaged or stale: measure again

  LaunchSpec spec;
  spec.argv = {o.trainer_path, "probe"};
  spec.env = o.env;
  spec.log_path = o.work_dir + "/probe.log";
  spec.working_dir = o.work_dir;
  ::unlink(spec.log_path.c_str());  // the output of this probe only
  const std::string what = absl::StrCat("throughput probe (", o.trainer_path, " probe)");
  absl::StatusOr<int> pid = launcher.Start(spec);
  if (!pid.ok())
    return absl::Status(pid.status().code(), absl::StrCat(what, ": ", pid.status().message()));
  const absl::Time deadline = absl::Now() + o.timeout;
  std::optional<ProcessExit> exit;
  while (!(exit = launcher.Poll(*pid))) {
    if (absl::Now() >= deadline) {
      (void)launcher.Signal(*pid, SIGKILL);
      while (!(exit = launcher.Poll(*pid))) absl::SleepFor(o.poll_interval);
      launcher.Forget(*pid);
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": no result within ", absl::FormatDuration(o.timeout)));
    }
    absl::SleepFor(o.poll_interval);
  }
  launcher.Forget(*pid);
  if (exit->signal != 0 || exit->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat(what,
                     exit->signal ? absl::StrCat(": killed by signal ", exit->signal)
                                  : absl::StrCat(": exit status ", exit->exit_code),
                     exit->last_error_line.empty() ? "" : ": ", exit->last_error_line));
  }
  absl::StatusOr<std::string> out = ReadFile(spec.log_path, kMaxProbeOutput);
  if (!out.ok()) return out.status();
  absl::StatusOr<double> sps = ParseProbeOutput(*out, what);
  if (!sps.ok()) return sps.status();
  const nlohmann::json entry = {{"key", *key}, {"samples_per_second", *sps}};
  if (absl::Status s = WriteFileAtomic(cache_path, entry.dump() + "\n"); !s.ok()) return s;
  return ThroughputMeasurement{*sps, false};
}

}  // namespace ringmaster::agent
