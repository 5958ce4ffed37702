// `ringmaster local`: a whole cluster on this machine for one job. Starts a coordinator on
// 127.0.0.1 (a free port, a temporary database, plaintext: --insecure-loopback) and N agents (own
// work directories, address 127.0.0.1, no GPUs reported), submits the job, follows it to the end
// and shuts everything down, also on Ctrl-C (the job is cancelled first). Exit code: 0 when the
// job Succeeded.
//
// N is the job's `distributed.nodes` (its MAX for "MIN:MAX"), and its `procs_per_node` stands,
// unless --nodes / --procs-per-node are given: then the job is submitted with them instead, and
// each override is said on stderr with the job's own value.
//
// Processes and their logs live in a temporary directory (kept, and named, when the job did not
// succeed or with keep_dir).
//
// With metrics_port BASE (> 0), every process serves Prometheus' /metrics on 127.0.0.1: the
// coordinator on BASE, agent i (from 0) on BASE + 1 + i.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "jobspec/job_spec.h"

namespace ringmaster::cli {

struct LocalOptions {
  std::string job_path;
  std::optional<int> nodes;           // --nodes; unset: the job's distributed.nodes
  std::optional<int> procs_per_node;  // --procs-per-node; unset: the job's procs_per_node
  std::string trainer;                // ringmaster-trainer
  std::string coordinator_bin;        // ringmaster-coordinator
  std::string agent_bin;              // ringmaster-agent
  bool keep_dir = false;
  int metrics_port = 0;  // BASE; 0: no /metrics
  // Every agent's GPU inventory, in the agent's --inventory-override syntax (e.g.
  // "1xNVIDIA H200:sm_90:141GiB"); "none": CPU nodes. Without a GPU the ranks placed on these
  // run the CUDA engine under the emulator (a build with RINGMASTER_CUDA_EMU).
  std::string gpus = "none";
};

// The argument of --metrics-listen for the coordinator (`agent` < 0) or agent `agent` when
// metrics start at port `base`.
std::string LocalMetricsAddress(int base, int agent);

// "dev accuracy 0.9460 (eval loss 0.1602, step 2000)" from the last evaluation line of a
// metrics.jsonl, which the trainer writes for the final (exported) weights; "eval loss …" for a
// regression; empty when there is none (or no file).
std::string LastEvalSummary(const std::string& metrics_path);

// The job's YAML with distributed.nodes = `nodes` and distributed.procs_per_node =
// `procs_per_node` where given (other keys unchanged; comments are not kept).
absl::StatusOr<std::string> OverrideDistributed(std::string_view yaml, std::optional<int> nodes,
                                                std::optional<int> procs_per_node);

// What `ringmaster local` runs a job with: agents to start, and the lines that say which of the
// job's distributed settings a flag overrides (none without flags).
struct LocalShape {
  int nodes = 1;           // agents started
  std::string procs;       // procs_per_node in force ("auto" or a number)
  int procs_estimate = 1;  // processes per node, for sharing the cores (auto: 1 on a CPU node)
  std::vector<std::string> overrides;
};
LocalShape ShapeOf(const trainer::JobSpec& job, const LocalOptions& options);

// The command lines that reach a running local cluster from another terminal (`status` and
// `logs` of rank 0), with `cli` the path of this program and `target` the coordinator's address.
std::vector<std::string> ReachCommands(const std::string& cli, const std::string& target,
                                       const std::string& job_id);

// A TCP port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> FreeLoopbackPort();

// The embedded demo job (jobspec/default_job.h) as a job file under `root`: writes
// root/runs/demo/job.yaml with its paths made absolute, and generates the demo dataset in
// root/runs/demo/data unless it is there. Returns the job file's path.
absl::StatusOr<std::string> PrepareDemoJob(const std::string& root);

int RunLocal(const LocalOptions& options, CliIo& io);

}  // namespace ringmaster::cli
