// One bench_scale measurement at one node count: the coordinator started, `n` agents
// registered and streaming, a job of n x gpus ranks submitted, timed until every agent has its
// StartRanks, the plan checked, everything torn down.
#pragma once

#include <string>
#include <vector>

#include "coordinator/bench/bench_common.h"

namespace ringmaster::bench_scale {

struct Result {
  int nodes = 0;
  int ranks = 0;
  double register_s = 0;       // first Register sent .. coordinator has every first report
  double register_rpcs_s = 0;  // first Register sent .. last Register answered
  double register_cpu_s = 0;
  double submit_rpc_s = 0;      // SubmitJob call
  double first_assigned_s = 0;  // submit .. first StartRanks received
  double all_assigned_s = 0;    // submit .. every StartRanks received
  double coord_launch_s = -1;   // submit .. coordinator logged "running" (from its log, ms)
  double assign_cpu_s = 0;      // coordinator CPU from submit to all assigned
  double get_job_s = 0;         // submit .. a GetJob sent after all were assigned returned
  double total_cpu_s = 0;       // coordinator CPU for the whole run, startup included
  long hwm_mib = 0;
  int threads = 0;
  bool verified = false;
  std::vector<std::string> errors;
};

// Runs in `tmp_root`/n<N>; a failed check is in Result::errors, a broken run exits (Die).
Result RunOnce(const Flags& flags, int n, const std::string& tmp_root);

}  // namespace ringmaster::bench_scale
