// How the CLI shows jobs and nodes: one-line progress for `--follow`, detail for `status`,
// tables for `list` and `nodes`. Pure functions of the protos, so they are tested directly.
#pragma once

#include <string>

#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster::cli {

// "Running", "Succeeded", ...; "Unknown" for values this build does not know.
std::string PhaseName(v1::JobPhase phase);
bool IsTerminal(v1::JobPhase phase);

// One line, no newline:
//   Running  step 120/1000  loss 0.4312  38.2 samples/s  ETA 1m23s  world 4  restarts 0/3
// Fields without data are left out (no step before the first report, no ETA while unknown);
// in Rendezvous the missing node count; on Failed the error; while stalled, the ranks missing
// from the collective.
std::string FormatProgressLine(const v1::JobStatus& status);

// "waiting for 1 more node (2 of 3 Ready)" for a job in Rendezvous that has fewer nodes than
// its minimum (`joined` of MIN have joined); empty otherwise.
std::string WaitingForNodes(const v1::JobStatus& status);

// What `submit` says about a job the cluster cannot place yet: how many of the cluster's nodes
// are Ready against the job's minimum, that the job waits, and until when (the join deadline)
// before it fails. Empty when enough nodes are Ready or the job is not waiting for nodes.
std::string SubmitWaitNote(const v1::JobStatus& status, const v1::ListNodesResponse& nodes);

// A straggler costing less than this (seconds per step) is noise: `status` does not name it.
inline constexpr double kStragglerShownAbove = 0.05;

// Several lines for `ringmaster status JOB`. A stalled job adds
//   stalled:    rank(s) 3 have not entered collective #12 (AllReduceSum); ranks 0,1,2 waiting 12.3s
// and the worst straggler above kStragglerShownAbove
//   straggler:  rank 2 (+0.31 s/step)
std::string FormatJobDetails(const v1::JobStatus& status);

// A table with a header for `ringmaster list`.
std::string FormatJobsTable(const v1::ListJobsResponse& jobs);

// A table with a header for `ringmaster nodes`.
std::string FormatNodesTable(const v1::ListNodesResponse& nodes);

}  // namespace ringmaster::cli
