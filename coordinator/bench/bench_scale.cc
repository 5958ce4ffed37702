// bench_scale: the control plane at scale (issue #5, docs/scale.md).
//
//   bench_scale [--nodes 64,512,4096] [--gpus 8] [--coordinator PATH] [--register-window 64]
//               [--connections 0] [--nodes-per-rack 32] [--no-ack] [--timeout 180]
//               [--keep] [--perf-record FILE]
//
// For each node count N it starts the real ringmaster-coordinator as a child process (its own
// temporary SQLite database, a free port chosen by the coordinator, --last-call 1s,
// --lost-after 600s), then simulates N agents in this process over real gRPC with the callback
// API: Register with an inventory of `--gpus` A100s (sm_80, 80 GiB) per node, hostnames spread
// over racks, then the bidirectional Heartbeat stream with the agent's first report. Once the
// coordinator has taken every node's first report (ListNodes: last heartbeat after
// registration), it submits a job with `distributed.nodes: N` and `procs_per_node: gpus` and
// measures the time from the start of SubmitJob until every simulated agent has received its
// StartRanks on its stream. Every StartRanks is checked: distinct global ranks covering
// 0..world-1 exactly once, WORLD_SIZE = N x gpus, contiguous ranks per node in topology order
// (rack, hostname), local ranks and GPU indices 0..gpus-1, RANK/LOCAL_RANK/GROUP_RANK, and
// MASTER_ADDR naming rank 0's node.
//
// The coordinator runs in its own process so that its CPU time (/proc/PID/stat, user + system)
// and peak RSS (VmHWM) are its own, not the simulated agents'. Both processes share the machine's
// cores, so the wall-clock times include the agents' side of every RPC.
//
// Each agent has its own channel (a separate TCP connection, like a real cluster) unless
// --connections K > 0 spreads them over K channels. The process's soft fd limit is raised to its
//
// The pieces: bench_common.h (flags), coordinator_process.* (the child process and what /proc
// says of it), sim_agents.* (the simulated agents), plan_check.* (the job and the checks of the
// plan the agents received), run_once.* (one measurement); this file parses the flags and
// prints the table.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "coordinator/bench/bench_common.h"
#include "coordinator/bench/run_once.h"

namespace {

using ringmaster::bench_scale::Die;
using ringmaster::bench_scale::Flags;
using ringmaster::bench_scale::Result;
using ringmaster::bench_scale::RunOnce;

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

void Usage() {
  std::fputs(
      "usage: bench_scale [--nodes 64,512,4096] [--gpus 8] [--coordinator PATH]\n"
      "         [--register-window 64] [--connections 0] [--nodes-per-rack 32] [--no-ack]\n"
      "         [--timeout 180] [--keep] [--perf-record FILE]\n",
      stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  flags.coordinator = SelfDir() + "/ringmaster-coordinator";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](int* out) {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, out)) Die(absl::StrCat(std::string(a), ": not a number: ", v));
    };
    if (a == "--nodes") {
      flags.nodes.clear();
      for (absl::string_view s : absl::StrSplit(value(), ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(s, &v) || v < 1) Die(absl::StrCat("--nodes: bad count ", s));
        flags.nodes.push_back(v);
      }
    } else if (a == "--gpus") {
      number(&flags.gpus);
    } else if (a == "--coordinator") {
      flags.coordinator = value();
    } else if (a == "--register-window") {
      number(&flags.register_window);
    } else if (a == "--connections") {
      number(&flags.connections);
    } else if (a == "--nodes-per-rack") {
      number(&flags.nodes_per_rack);
    } else if (a == "--no-ack") {
      flags.ack = false;
    } else if (a == "--timeout") {
      if (!absl::SimpleAtod(value(), &flags.timeout_s)) Die("--timeout: not a number");
    } else if (a == "--keep") {
      flags.keep = true;
    } else if (a == "--perf-record") {
      flags.perf_record = value();
    } else {
      Usage();
      return 2;
    }
  }
  if (flags.gpus < 1 || flags.register_window < 1 || flags.nodes_per_rack < 1) {
    Die("--gpus, --register-window and --nodes-per-rack must be >= 1");
  }
  if (access(flags.coordinator.c_str(), X_OK) != 0) {
    Die("no ringmaster-coordinator at " + flags.coordinator + " (use --coordinator PATH)");
  }

  // Every agent's connection is one fd here and one in the coordinator (which inherits this
  // limit); raise the soft limit to the hard one.
  rlimit fds{};
  getrlimit(RLIMIT_NOFILE, &fds);
  const rlim_t soft_before = fds.rlim_cur;
  fds.rlim_cur = fds.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &fds) != 0) Die("setrlimit(RLIMIT_NOFILE) failed");
  const int max_nodes = *std::max_element(flags.nodes.begin(), flags.nodes.end());
  std::fprintf(stderr, "bench_scale: fd limit %llu -> %llu (soft -> hard)\n",
               static_cast<unsigned long long>(soft_before),
               static_cast<unsigned long long>(fds.rlim_cur));
  if (fds.rlim_cur != RLIM_INFINITY && static_cast<long long>(fds.rlim_cur) < max_nodes + 256) {
    Die(absl::StrCat("fd limit ", fds.rlim_cur, " is too low for ", max_nodes, " agents"));
  }
  signal(SIGPIPE, SIG_IGN);

  char tmpl[] = "/tmp/bench_scale.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string tmp_root = tmpl;

  std::vector<Result> results;
  bool all_ok = true;
  for (int n : flags.nodes) {
    Result r = RunOnce(flags, n, tmp_root);
    std::fprintf(stderr,
                 "[%d nodes] registered in %.3f s; submit -> all %d ranks assigned %.3f s "
                 "(coordinator CPU %.3f s), peak RSS %ld MiB, %d threads: %s\n",
                 n, r.register_s, r.ranks, r.all_assigned_s, r.assign_cpu_s, r.hwm_mib, r.threads,
                 r.verified ? "verified" : "FAILED");
    for (const std::string& e : r.errors) std::fprintf(stderr, "  error: %s\n", e.c_str());
    all_ok = all_ok && r.verified;
    results.push_back(std::move(r));
  }
  if (!flags.keep) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_root, ec);
  } else {
    std::fprintf(stderr, "bench_scale: kept %s\n", tmp_root.c_str());
  }

  std::printf(
      "| nodes x GPUs | ranks | register all (s) | coord. CPU, register (s) | SubmitJob RPC (s) "
      "| coord. planned+queued (s) | first StartRanks (s) | submit -> all ranks assigned (s) "
      "| coord. CPU, submit -> assigned (s) | GetJob answered (s) | coord. CPU total (s) "
      "| coord. peak RSS (MiB) | coord. threads | checks |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    std::printf(
        "| %d x %d | %d | %.3f | %.2f | %.3f | %s | %.3f | **%.3f** | %.2f | %.3f | %.2f | %ld "
        "| %d | %s |\n",
        r.nodes, flags.gpus, r.ranks, r.register_s, r.register_cpu_s, r.submit_rpc_s,
        r.coord_launch_s < 0 ? "?" : absl::StrFormat("%.3f", r.coord_launch_s).c_str(),
        r.first_assigned_s, r.all_assigned_s, r.assign_cpu_s, r.get_job_s, r.total_cpu_s, r.hwm_mib,
        r.threads, r.verified ? "pass" : "FAIL");
  }
  return all_ok ? 0 : 1;
}
