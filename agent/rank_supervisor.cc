#include "agent/rank_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/path_policy.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/log_escape.h"
#include "common/open_beneath.h"
#include "common/rank_status.h"
#include "google/protobuf/util/time_util.h"
#include "jobspec/job_spec.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::agent {
namespace {

google::protobuf::Timestamp UnixSecondsToTimestamp(double seconds) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
      static_cast<int64_t>(seconds * 1e9));
}

// The collective trace and step figures of a running rank, from its status block. A rank that
// has not written one yet (still starting) reports has_trace = false.
void AddTrace(const std::string& status_path, v1::RankProgress* rp) {
  if (status_path.empty()) return;
  absl::StatusOr<trainer::RankFigures> f = trainer::ReadRankStatusFile(status_path);
  if (!f.ok()) return;
  rp->set_has_trace(true);
  rp->set_collective_seq(f->collective_seq);
  if (f->collective_seq > 0) rp->set_collective_op(trainer::CollectiveName(f->collective_op));
  rp->set_in_collective(f->in_collective);
  if (f->collective_entered_unix > 0) {
    *rp->mutable_collective_entered_at() = UnixSecondsToTimestamp(f->collective_entered_unix);
  }
  rp->set_comm_seconds(f->comm_seconds_total());
  if (f->last_step_unix > 0)
    *rp->mutable_last_step_at() = UnixSecondsToTimestamp(f->last_step_unix);
  rp->set_steps_this_process(f->steps_total);
}

// A trainer's error line as the coordinator may receive it: valid UTF-8 with its control
// characters escaped (a hostile model file's bytes can be quoted in it, issue #31), at most
// kMaxErrorLineBytes and not cut inside a character.
std::string WireErrorLine(std::string_view line) {
  return std::string(Utf8Prefix(EscapeControlCharacters(Utf8Prefix(line, kMaxErrorLineBytes)),
                                kMaxErrorLineBytes));
}

bool ValidName(const std::string& s, size_t max, bool lower_ok) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    (lower_ok && ((c >= 'a' && c <= 'z') || c == '-' || c == '.'));
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateJobId(const std::string& id) {
  if (!ValidName(id, 128, true) || id == "." || id == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("job id '", id.substr(0, 128), "' is not [A-Za-z0-9_.-]{1,128}"));
  }
  return absl::OkStatus();
}

}  // namespace

bool ReservedEnvName(std::string_view name) {
  // RINGMASTER_STATUS_FILE and CUDA_VISIBLE_DEVICES are set by the agent (Launch);
  // RINGMASTER_EMULATED_CUDA_OK (an emulated test build's opt-in to CUDA jobs) comes only from
  // the agent's own environment; the others come from the node or name code or files the loader,
  // libc, a shell, Python, OpenMP, CUDA or NCCL would load.
  // clang-format off
  static constexpr std::string_view kNames[] = {
      "RINGMASTER_STATUS_FILE", "CUDA_VISIBLE_DEVICES", "RINGMASTER_EMULATED_CUDA_OK",
      "PATH", "HOME", "TMPDIR", "SHELL", "IFS", "ENV", "BASH_ENV",
      "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES", "RESOLV_HOST_CONF",
      "LOCALDOMAIN", "MALLOC_CHECK_", "MALLOC_TRACE", "TZDIR",
      "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP",
      "OMP_TOOL", "OMP_TOOL_LIBRARIES", "OMP_TOOL_VERBOSE_INIT",
      "CUDA_INJECTION64_PATH", "CUDA_INJECTION32_PATH",
      "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
      "NCCL_CONF_FILE", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE",
      "NCCL_GRAPH_FILE", "NCCL_GRAPH_DUMP_FILE"};
  // clang-format on
  static constexpr std::string_view kPrefixes[] = {"LD_", "DYLD_", "GLIBC_"};
  for (std::string_view n : kNames) {
    if (name == n) return true;
  }
  for (std::string_view p : kPrefixes) {
    if (name.substr(0, p.size()) == p) return true;
  }
  return false;
}

std::string VisibleDevicesFor(int gpu_index, const std::optional<std::string>& agent_visible) {
  if (gpu_index < 0) return "";
  if (agent_visible.has_value() && !agent_visible->empty()) {
    const std::vector<std::string> ids = absl::StrSplit(*agent_visible, ',');
    if (static_cast<size_t>(gpu_index) < ids.size()) return ids[static_cast<size_t>(gpu_index)];
  }
  return std::to_string(gpu_index);
}

absl::Status ValidateEnv(const google::protobuf::Map<std::string, std::string>& env) {
  if (env.size() > 256) return absl::InvalidArgumentError("more than 256 environment variables");
  for (const auto& [k, v] : env) {
    if (!ValidName(k, 128, false)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable name '", k.substr(0, 128), "' is not [A-Z0-9_]+"));
    }
    if (ReservedEnvName(k)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable ", k, " is reserved: the agent sets it or it loads other code"));
    }
    if (v.size() > (size_t{128} << 10) || v.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", k, ": value over 128 KiB or with a NUL byte"));
    }
  }
  return absl::OkStatus();
}

RankSupervisor::RankSupervisor(SupervisorOptions options, Launcher* launcher, EnvLookup agent_env)
    : options_(std::move(options)), launcher_(launcher), agent_env_(std::move(agent_env)) {}

bool RankSupervisor::OlderAlive(const std::string& job, int64_t generation) const {
  for (const auto& [key, gen] : gens_) {
    if (key.first != job || key.second >= generation) continue;
    for (const auto& [r, rank] : gen.ranks) {
      if (!Ended(rank)) return true;
    }
  }
  return false;
}

absl::StatusOr<bool> RankSupervisor::Start(uint64_t command_id, const v1::StartRanks& cmd,
                                           absl::Time now) {
  if (absl::Status s = ValidateJobId(cmd.job_id()); !s.ok()) return s;
  if (cmd.generation() < 0) return absl::InvalidArgumentError("negative generation");
  if (cmd.ranks().empty()) return absl::InvalidArgumentError("StartRanks without ranks");
  if (absl::Status s = ValidateEnv(cmd.common_env()); !s.ok()) return s;
  std::set<uint32_t> globals, locals;
  for (const v1::RankLaunch& r : cmd.ranks()) {
    if (r.global_rank() >= cmd.world_size() || !globals.insert(r.global_rank()).second ||
        !locals.insert(r.local_rank()).second) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r.global_rank(), " (local ",
                                                     r.local_rank(), "): duplicate or not below ",
                                                     "world_size ", cmd.world_size()));
    }
    if (absl::Status s = ValidateEnv(r.env()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r.global_rank(), ": ", s.message()));
    }
  }
  const Key key{cmd.job_id(), cmd.generation()};
  if (gens_.count(key)) return true;  // already started: at-least-once delivery
  if (deferred_.count(key)) return false;
  // A newer generation replaces older ones: stop what still runs, start when it has ended.
  if (OlderAlive(cmd.job_id(), cmd.generation())) {
    for (auto& [k, gen] : gens_) {
      if (k.first != cmd.job_id() || k.second >= cmd.generation()) continue;
      for (auto& [r, rank] : gen.ranks) {
        if (!Ended(rank)) StopRank(rank, options_.default_grace, now);
      }
    }
    deferred_[key] = {command_id, cmd};
    return false;
  }
  for (auto it = gens_.begin(); it != gens_.end();) {
    const bool older = it->first.first == cmd.job_id() && it->first.second < cmd.generation();
    if (older) {
      for (auto& [r, rank] : it->second.ranks) {
        if (rank.pid > 0) launcher_->Forget(rank.pid);
      }
    }
    it = older ? gens_.erase(it) : std::next(it);
  }
  Generation& gen = gens_[key];
  gen.cmd = cmd;
  for (const v1::RankLaunch& r : cmd.ranks()) {
    Rank& rank = gen.ranks[r.global_rank()];
    rank.launch = r;
  }
  if (absl::Status s = Prepare(cmd, &gen); !s.ok()) {
    // Nothing can start: every rank reports why, marked deterministic (resending cannot help).
    for (auto& [r, rank] : gen.ranks) {
      rank.state = v1::RANK_PROCESS_STATE_FAILED_TO_START;
      rank.start_error = std::string(s.message()).substr(0, kMaxErrorLineBytes);
      rank.ended_at = now;
    }
    return s;
  }
  for (auto& [r, rank] : gen.ranks) Launch(gen, rank);
  return true;
}

absl::Status RankSupervisor::Prepare(const v1::StartRanks& cmd, Generation* gen) {
  if (!std::filesystem::path(cmd.base_dir()).is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_dir '", cmd.base_dir().substr(0, 256), "' is not absolute"));
  }
  absl::StatusOr<trainer::JobSpec> spec =
      trainer::ParseJobSpec(cmd.job_yaml(), absl::StrCat(cmd.job_id(), ".yaml"), cmd.base_dir());
  if (!spec.ok()) return spec.status();
  if (absl::Status s = CheckJobPaths(*spec, options_.allowed_roots); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(cmd.job_id(), ": ", s.message()));
  }
  if (!options_.allowed_roots.empty()) {
    // Created here relative to the root, following no link (a link planted below the root
    // cannot move it); the trainer is told the root and checks the same (file_util.h).
    gen->output_root = RootHolding(spec->output.dir, options_.allowed_roots);
    if (gen->output_root.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(cmd.job_id(), ": output.dir '", spec->output.dir,
                       "' is not written below an allowed root (write it without links)"));
    }
    if (absl::Status s = MakeDirsBeneath(gen->output_root, spec->output.dir); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(cmd.job_id(), ": output.dir: ", s.message()));
    }
  }
  gen->dir = (std::filesystem::path(options_.work_dir) / "jobs" / cmd.job_id() /
              absl::StrCat("gen-", cmd.generation()))
                 .string();
  if (absl::Status s = MakeDirs(gen->dir); !s.ok()) return s;
  gen->job_file = (std::filesystem::path(gen->dir) / "job.yaml").string();
  // Written resolved (absolute paths), so the trainer reads the job exactly as submitted.
  if (absl::Status s = WriteFileAtomic(gen->job_file, trainer::JobSpecToYaml(*spec)); !s.ok()) {
    return s;
  }
  gen->output_dir = spec->output.dir;
  gen->global_batch_size = spec->train.global_batch_size;
  gen->max_steps = spec->train.max_steps;
  return absl::OkStatus();
}

void RankSupervisor::Launch(Generation& gen, Rank& rank) {
  LaunchSpec spec;
  spec.argv = {options_.trainer_path, "train", "--config", gen.job_file};
  for (const std::string& name : options_.passthrough_env) {
    if (std::optional<std::string> v = agent_env_(name)) spec.env[name] = *v;
  }
  if (!spec.env.count("OMP_NUM_THREADS")) {
    const int per_rank = std::max(1, options_.cpu_cores / std::max(1, gen.cmd.ranks_size()));
    spec.env["OMP_NUM_THREADS"] = std::to_string(per_rank);
  }
  for (const auto& [k, v] : gen.cmd.common_env()) spec.env[k] = v;
  for (const auto& [k, v] : rank.launch.env()) spec.env[k] = v;
  if (!gen.output_root.empty()) spec.env["RINGMASTER_ALLOWED_ROOT"] = gen.output_root;
  spec.env["CUDA_VISIBLE_DEVICES"] =
      VisibleDevicesFor(rank.launch.gpu_index(), agent_env_("CUDA_VISIBLE_DEVICES"));
  rank.log_path =
      (std::filesystem::path(gen.dir) / absl::StrCat("rank-", rank.launch.global_rank(), ".log"))
          .string();
  spec.log_path = rank.log_path;
  // A restarted rank must not show its predecessor's figures until it writes its own.
  rank.status_path =
      (std::filesystem::path(gen.dir) / absl::StrCat("rank-", rank.launch.global_rank(), ".status"))
          .string();
  std::error_code ignored;
  std::filesystem::remove(rank.status_path, ignored);
  spec.env["RINGMASTER_STATUS_FILE"] = rank.status_path;
  if (!rank.progress) {
    rank.progress =
        std::make_unique<ProgressReader>(rank.status_path, gen.global_batch_size, gen.max_steps);
  }
  spec.working_dir = gen.dir;
  rank.exit.reset();
  rank.start_error.clear();
  rank.stop_requested = false;
  rank.restart_pending = false;
  rank.kill_at.reset();
  rank.killed = false;
  ++launches_;
  absl::StatusOr<int> pid = launcher_->Start(spec);
  if (!pid.ok()) {
    rank.pid = -1;
    rank.state = v1::RANK_PROCESS_STATE_FAILED_TO_START;
    rank.start_error = std::string(pid.status().message()).substr(0, kMaxErrorLineBytes);
    return;
  }
  rank.pid = *pid;
  rank.state = v1::RANK_PROCESS_STATE_STARTING;
}

void RankSupervisor::StopRank(Rank& rank, absl::Duration grace, absl::Time now) {
  rank.restart_pending = false;
  rank.stop_requested = true;
  if (Ended(rank) || rank.pid <= 0) return;
  if (!rank.kill_at) {
    (void)launcher_->Signal(rank.pid, SIGTERM);
    // A stopped process (SIGSTOP, a hang simulated or a debugger's break) keeps SIGTERM pending
    // until it runs again, and would sit out the grace period to its SIGKILL. As systemd and
    // the shell do, SIGCONT follows, so it checkpoints or exits now.
    if (launcher_->IsStopped(rank.pid)) (void)launcher_->Signal(rank.pid, SIGCONT);
  }
  const absl::Time at = now + grace;
  if (!rank.kill_at || at < *rank.kill_at) rank.kill_at = at;
}

absl::Status RankSupervisor::Stop(const v1::StopRanks& cmd, absl::Time now) {
  if (absl::Status s = ValidateJobId(cmd.job_id()); !s.ok()) return s;
  absl::Duration grace =
      absl::Seconds(cmd.grace_period().seconds()) + absl::Nanoseconds(cmd.grace_period().nanos());
  if (grace <= absl::ZeroDuration()) grace = options_.default_grace;
  for (auto& [key, gen] : gens_) {
    if (key.first != cmd.job_id() || key.second > cmd.generation()) continue;
    for (auto& [r, rank] : gen.ranks) StopRank(rank, grace, now);
  }
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (it->first.first == cmd.job_id() && it->first.second <= cmd.generation()) {
      outcomes_.emplace_back(it->second.first,
                             absl::CancelledError("stopped before its ranks could start"));
      it = deferred_.erase(it);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

absl::Status RankSupervisor::Restart(const v1::RestartRank& cmd, absl::Time now) {
  auto it = gens_.find(Key{cmd.job_id(), cmd.generation()});
  if (it == gens_.end() || !it->second.ranks.count(cmd.global_rank())) {
    return absl::NotFoundError(absl::StrCat("no rank ", cmd.global_rank(), " of job ",
                                            cmd.job_id().substr(0, 128), " generation ",
                                            cmd.generation(), " on this node"));
  }
  Generation& gen = it->second;
  if (gen.job_file.empty()) return absl::FailedPreconditionError("the job file was never written");
  Rank& rank = gen.ranks[cmd.global_rank()];
  if (Ended(rank)) {
    if (rank.pid > 0) launcher_->Forget(rank.pid);
    Launch(gen, rank);
    return absl::OkStatus();
  }
  StopRank(rank, options_.default_grace, now);
  rank.stop_requested = false;
  rank.restart_pending = true;
  return absl::OkStatus();
}

void RankSupervisor::StopAll(absl::Duration grace, absl::Time now) {
  for (auto& [key, gen] : gens_) {
    for (auto& [r, rank] : gen.ranks) StopRank(rank, grace, now);
  }
  for (auto& [key, d] : deferred_) {
    outcomes_.emplace_back(d.first, absl::CancelledError("agent shutting down"));
  }
  deferred_.clear();
}

bool RankSupervisor::Tick(absl::Time now) {
  bool changed = false;
  for (auto& [key, gen] : gens_) {
    for (auto& [r, rank] : gen.ranks) {
      if (Ended(rank) || rank.pid <= 0) continue;
      if (std::optional<ProcessExit> e = launcher_->Poll(rank.pid)) {
        changed = true;
        rank.exit = *e;
        rank.ended_at = now;
        if (rank.restart_pending) {
          launcher_->Forget(rank.pid);
          Launch(gen, rank);
          continue;
        }
        if (rank.stop_requested) {
          rank.state = v1::RANK_PROCESS_STATE_STOPPED;
        } else if (e->signal != 0) {
          rank.state = v1::RANK_PROCESS_STATE_SIGNALED;
        } else {
          rank.state = v1::RANK_PROCESS_STATE_EXITED;
        }
        continue;
      }
      if (rank.kill_at && now >= *rank.kill_at && !rank.killed) {
        (void)launcher_->Signal(rank.pid, SIGKILL);
        rank.killed = true;
      }
    }
  }
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    if (OlderAlive(it->first.first, it->first.second)) {
      ++it;
      continue;
    }
    auto [id, cmd] = std::move(it->second);
    it = deferred_.erase(it);
    absl::StatusOr<bool> r = Start(id, cmd, now);
    outcomes_.emplace_back(id, r.status());
    changed = true;
  }
  for (auto it = gens_.begin(); it != gens_.end();) {
    bool expired = true;
    for (auto& [r, rank] : it->second.ranks) {
      expired = expired && Ended(rank) && rank.ended_at + options_.keep_ended <= now;
    }
    if (expired) {
      for (auto& [r, rank] : it->second.ranks) {
        if (rank.pid > 0) launcher_->Forget(rank.pid);
      }
      it = gens_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed;
}

std::vector<std::pair<uint64_t, absl::Status>> RankSupervisor::TakeDeferredOutcomes() {
  return std::exchange(outcomes_, {});
}

int RankSupervisor::LiveRanks() const {
  int n = 0;
  for (const auto& [key, gen] : gens_) {
    for (const auto& [r, rank] : gen.ranks) n += Ended(rank) ? 0 : 1;
  }
  return n;
}

std::vector<RankSupervisor::StatusSource> RankSupervisor::StatusSources() const {
  std::vector<StatusSource> out;
  for (const auto& [key, gen] : gens_) {
    for (const auto& [r, rank] : gen.ranks) {
      if (!Ended(rank) && !rank.status_path.empty()) {
        out.push_back({key.first, key.second, r, rank.status_path});
      }
    }
  }
  return out;
}

std::vector<v1::RankProgress> RankSupervisor::Report(absl::Time now) {
  std::vector<v1::RankProgress> out;
  for (auto& [key, gen] : gens_) {
    // The newest checkpoint with a manifest (rank 0 writes it last, after every shard is durable).
    // Only rank 0's report carries it to the coordinator: scan only where rank 0 runs.
    int64_t committed = 0;
    if (!gen.output_dir.empty() && gen.ranks.count(0)) {
      const std::vector<std::string> ckpts = trainer::ListShardedCheckpoints(gen.output_dir);
      if (!ckpts.empty()) {
        const std::string name = std::filesystem::path(ckpts.back()).filename().string();
        if (!absl::SimpleAtoi(name.substr(name.find('-') + 1), &committed)) committed = 0;
      }
    }
    for (auto& [r, rank] : gen.ranks) {
      JobProgress p;
      if (rank.progress) p = rank.progress->Update(now);
      if (rank.state == v1::RANK_PROCESS_STATE_STARTING && p.step > 0) {
        rank.state = v1::RANK_PROCESS_STATE_RUNNING;
      }
      v1::RankProgress rp;
      rp.set_job_id(key.first);
      rp.set_generation(key.second);
      rp.set_global_rank(rank.launch.global_rank());
      rp.set_local_rank(rank.launch.local_rank());
      rp.set_state(rank.state);
      rp.set_pid(rank.pid > 0 ? rank.pid : 0);
      rp.set_step(p.step);
      rp.set_total_steps(p.total_steps);
      rp.set_loss(p.loss);
      rp.set_committed_step(committed);
      if (gen.cmd.world_size() > 0) {
        rp.set_samples_per_second(p.samples_per_second / gen.cmd.world_size());
      }
      if (!Ended(rank)) {
        AddTrace(rank.status_path, &rp);
        rp.set_process_stopped(rank.pid > 0 && launcher_->IsStopped(rank.pid));
      }
      if (!rank.start_error.empty()) {
        rp.set_last_error_line(WireErrorLine(rank.start_error));
        if (gen.job_file.empty()) rp.set_failure_kind(v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
      }
      if (rank.exit) {
        rp.set_exit_code(rank.exit->exit_code);
        rp.set_signal(rank.exit->signal);
        const bool failed = rank.exit->signal != 0 || rank.exit->exit_code != 0;
        if (failed && !rank.stop_requested) {
          rp.set_last_error_line(WireErrorLine(rank.exit->last_error_line));
          if (rank.exit->signal == 0 && rank.exit->exit_code == kExitBadJob) {
            rp.set_failure_kind(v1::FAILURE_KIND_DETERMINISTIC_STARTUP);
          }
          if (rank.exit->signal == 0 && rank.exit->exit_code == kExitDiverged) {
            rp.set_failure_kind(v1::FAILURE_KIND_DIVERGED);
          }
        }
      }
      out.push_back(std::move(rp));
    }
  }
  return out;
}

v1::LogTail RankSupervisor::LogTail(uint64_t command_id, const v1::SendLogs& cmd) const {
  namespace fs = std::filesystem;
  constexpr uint64_t kMaxBytes = 1 << 20;
  v1::LogTail out;
  out.set_command_id(command_id);
  const std::string& job = cmd.job_id();
  const bool plain =
      !job.empty() && job.size() <= 128 && job[0] != '.' &&
      std::all_of(job.begin(), job.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      });
  if (!plain) {
    out.set_error(absl::StrCat("'", job.substr(0, 64), "' is not a job id"));
    return out;
  }
  const fs::path job_dir = fs::path(options_.work_dir) / "jobs" / job;
  const std::string file = absl::StrCat("rank-", cmd.global_rank(), ".log");
  int64_t gen = cmd.generation();
  std::error_code ec;
  if (gen < 0) {  // the newest generation with this rank's log
    for (const fs::directory_entry& e : fs::directory_iterator(job_dir, ec)) {
      const std::string name = e.path().filename().string();
      int64_t g = 0;
      if (name.rfind("gen-", 0) == 0 && absl::SimpleAtoi(name.substr(4), &g) && g > gen &&
          fs::exists(e.path() / file)) {
        gen = g;
      }
    }
  }
  out.set_generation(gen);
  const fs::path path = job_dir / absl::StrCat("gen-", gen) / file;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (gen < 0 || !in) {
    out.set_error(absl::StrCat("no log of rank ", cmd.global_rank(), " of job ", job,
                               gen < 0 ? "" : absl::StrCat(" generation ", gen), " on this node"));
    return out;
  }
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  const uint64_t want =
      std::min<uint64_t>(cmd.max_bytes() == 0 ? kMaxBytes : cmd.max_bytes(), kMaxBytes);
  const uint64_t n = std::min(size, want);
  std::string data(n, '\0');
  in.seekg(static_cast<std::streamoff>(size - n));
  in.read(data.data(), static_cast<std::streamsize>(n));
  data.resize(static_cast<size_t>(in.gcount()));
  out.set_data(std::move(data));
  out.set_truncated(size > n);
  return out;
}

}  // namespace ringmaster::agent
