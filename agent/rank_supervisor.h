// The trainer processes of one node: starts the ranks a StartRanks names, stops them on
// StopRanks (SIGTERM, SIGKILL after the grace period), restarts one on RestartRank, watches them
// end, and describes every local rank as a RankProgress for the heartbeat.
//
// What runs is fixed by the agent, never by the command: `<trainer> train --config <job file>`,
// the job file being the command's job YAML parsed with the trainer's own strict parser (paths
// resolved against the command's base_dir, and confined to SupervisorOptions::allowed_roots when
// set: agent/path_policy.h) and written into the agent's work directory. The command supplies
// only environment variables, whose names and sizes are validated and which may not replace what
// the agent controls (ReservedEnvName).
//
// Commands are idempotent (agent.proto): a StartRanks for a (job, generation) already started
// is acknowledged without starting anything. A StartRanks whose job still has ranks of an older
// generation alive stops those first and starts once they have ended (then it is acknowledged).
//
// Time comes in as arguments (`now`), so tests drive it with a fake clock and a FakeLauncher.
// Thread-compatible: the agent's loop owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/launcher.h"
#include "agent/progress_reader.h"
#include "agent/rotating_log.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::agent {

struct SupervisorOptions {
  std::string trainer_path;  // the only binary this agent runs
  std::string work_dir;      // job files and rank logs: <work_dir>/jobs/<job>/gen-<g>/
  int cpu_cores = 1;         // OMP_NUM_THREADS = cores / local ranks unless the agent's env sets it
  // Variables passed from the agent's own environment to the trainers (when set there);
  // RINGMASTER_EMULATED_CUDA_OK is an emulated test build's opt-in to CUDA jobs.
  std::vector<std::string> passthrough_env = {"PATH",
                                              "HOME",
                                              "LANG",
                                              "LC_ALL",
                                              "TZ",
                                              "TMPDIR",
                                              "LD_LIBRARY_PATH",
                                              "OMP_NUM_THREADS",
                                              "RINGMASTER_COLLECTIVE_TIMEOUT_S",
                                              "RINGMASTER_RENDEZVOUS_TIMEOUT_S",
                                              "RINGMASTER_SLOWDOWN",
                                              "NCCL_SOCKET_IFNAME",
                                              "NCCL_IB_DISABLE",
                                              "NCCL_DEBUG",
                                              "GLOO_SOCKET_IFNAME",
                                              "RINGMASTER_EMULATED_CUDA_OK"};
  // Directories every path of a job (data, model, output) must lie in (--allowed-root); empty =
  // no restriction. A job naming anything else fails to start, as a deterministic error.
  std::vector<std::string> allowed_roots;
  absl::Duration default_grace = absl::Seconds(30);  // StopRanks without grace_period
  absl::Duration keep_ended = absl::Minutes(10);     // ended ranks stay in reports this long
};

// Environment of the agent process, injected for tests.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// CUDA_VISIBLE_DEVICES for a rank the plan gave GPU `gpu_index` (RankLaunch.gpu_index: the
// index in this node's inventory, which counts the GPUs the agent itself sees): that index, or
// under the agent's own CUDA_VISIBLE_DEVICES the entry at that position. A CPU rank
// (gpu_index < 0) gets the empty string, so that it sees no GPU at all.
std::string VisibleDevicesFor(int gpu_index, const std::optional<std::string>& agent_visible);

// Checks a command's environment: names [A-Z0-9_]+ (at most 128 bytes), values without NUL
// (at most 128 KiB each), at most 256 variables, none reserved. InvalidArgument naming the
// variable.
absl::Status ValidateEnv(const google::protobuf::Map<std::string, std::string>& env);

// Variables a command may not set: those the agent sets itself (RINGMASTER_STATUS_FILE), those
// taken from the node (PATH, HOME, TMPDIR, LD_LIBRARY_PATH) and those that make the dynamic
// loader, libc, OpenMP, CUDA or NCCL load other code or files (LD_*, GCONV_PATH, OMP_TOOL_*,
// CUDA_INJECTION64_PATH, NCCL_*_PLUGIN, ...).
bool ReservedEnvName(std::string_view name);

class RankSupervisor {
 public:
  RankSupervisor(SupervisorOptions options, Launcher* launcher, EnvLookup agent_env);

  // Each returns the command's outcome: OK (done: acknowledge), or an error (refuse with its
  // message). Start returns false when it waits for older ranks of the job to end; its outcome
  // comes later from TakeDeferredOutcomes.
  absl::StatusOr<bool> Start(uint64_t command_id, const v1::StartRanks& cmd, absl::Time now);
  absl::Status Stop(const v1::StopRanks& cmd, absl::Time now);
  absl::Status Restart(const v1::RestartRank& cmd, absl::Time now);
  // The end of a rank's log (SendLogs). Reads only <work_dir>/jobs/<job>/gen-<g>/rank-<r>.log,
  // with the job id checked to be a plain name; the answer carries an error when there is none.
  v1::LogTail LogTail(uint64_t command_id, const v1::SendLogs& cmd) const;
  // Stops every rank (agent shutdown).
  void StopAll(absl::Duration grace, absl::Time now);

  // Polls the processes, sends SIGKILL past grace deadlines, runs deferred starts and restarts.
  // True when any rank changed state (the agent reports at once then).
  bool Tick(absl::Time now);

  // Deferred StartRanks that have now run or failed: (command id, outcome).
  std::vector<std::pair<uint64_t, absl::Status>> TakeDeferredOutcomes();

  // Every local rank, for the heartbeat. Each rank's progress comes from its status block.
  std::vector<v1::RankProgress> Report(absl::Time now);

  // Ranks not yet ended.
  int LiveRanks() const;

  // Where each rank not yet ended records its live figures (RINGMASTER_STATUS_FILE).
  struct StatusSource {
    std::string job_id;
    int64_t generation = 0;
    uint32_t global_rank = 0;
    std::string path;
  };
  std::vector<StatusSource> StatusSources() const;

  // Trainer processes started so far (first starts and restarts).
  uint64_t launches() const { return launches_; }

 private:
  struct Rank {
    v1::RankLaunch launch;
    int pid = -1;
    v1::RankProcessState state = v1::RANK_PROCESS_STATE_STARTING;
    std::optional<ProcessExit> exit;
    bool stop_requested = false;  // by the coordinator: an exit is STOPPED
    bool restart_pending = false;
    std::optional<absl::Time> kill_at;
    bool killed = false;  // SIGKILL sent
    absl::Time ended_at;
    std::string log_path;
    std::string status_path;  // the trainer's rank status block (common/rank_status.h)
    std::unique_ptr<ProgressReader> progress;  // of status_path, kept across restarts
    std::string start_error;
  };
  struct Generation {
    v1::StartRanks cmd;
    std::string job_file;
    std::string dir;
    std::string output_dir;          // the job's output.dir: its committed checkpoints
    std::string output_root;         // the allowed root holding it, for the trainer; or empty
    std::map<uint32_t, Rank> ranks;  // by global rank
    int64_t global_batch_size = 0, max_steps = 0;  // the spec's, for progress
  };
  using Key = std::pair<std::string, int64_t>;  // (job id, generation)

  absl::Status Prepare(const v1::StartRanks& cmd, Generation* gen);
  void Launch(Generation& gen, Rank& rank);
  bool OlderAlive(const std::string& job, int64_t generation) const;
  void StopRank(Rank& rank, absl::Duration grace, absl::Time now);
  static bool Ended(const Rank& r) { return r.exit.has_value() || !r.start_error.empty(); }

  SupervisorOptions options_;
  Launcher* launcher_;
  EnvLookup agent_env_;
  std::map<Key, Generation> gens_;
  std::map<Key, std::pair<uint64_t, v1::StartRanks>> deferred_;  // waiting for older ranks
  std::vector<std::pair<uint64_t, absl::Status>> outcomes_;
  uint64_t launches_ = 0;
};

}  // namespace ringmaster::agent
