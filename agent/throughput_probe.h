// The node's trainer throughput, measured once: the agent runs its own trainer binary's
// `probe` command (trainer/train/throughput_probe.h) before registering and reports the
// figure in its inventory (NodeInventory.trainer_samples_per_second); the coordinator's planner
// gives each rank a micro-batch share proportional to it. The result is cached in the work
// directory and reused while the trainer binary (path, size, modification time), the device
// description and the probe's environment (RINGMASTER_SLOWDOWN, OMP_NUM_THREADS) stay the same.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/launcher.h"

namespace ringmaster::agent {

struct ThroughputProbeOptions {
  std::string trainer_path;
  std::string work_dir;                    // throughput.json (cache) and probe.log live here
  std::string device;                      // what the probe runs on, e.g. "cpu:8" or "1xA100"
  std::map<std::string, std::string> env;  // the probe's whole environment
  absl::Duration timeout = absl::Minutes(2);
  absl::Duration poll_interval = absl::Milliseconds(20);
};

struct ThroughputMeasurement {
  double samples_per_second = 0;
  bool cached = false;  // read from throughput.json, no probe run
};

// The cached figure when its key matches, otherwise runs the probe through `launcher`, waits
// for it (killing it after `timeout`) and caches its figure. Errors name the trainer and say
// what went wrong (did not start, exit status with its last error line, no figure in its output).
absl::StatusOr<ThroughputMeasurement> MeasureTrainerThroughput(
    const ThroughputProbeOptions& options, Launcher& launcher);

}  // namespace ringmaster::agent
