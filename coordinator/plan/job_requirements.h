// What the coordinator needs from a submitted job spec: the strictly parsed spec (the trainer's
// own parser, so a job accepted here is one the trainer accepts) and, derived from it, the
// rendezvous window (`distributed.nodes: MIN:MAX`), the restart budget and the planner's
// settings. Parsing happens at submission: a spec error is the submitter's error, reported
// with file, line and key before anything is stored or started.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/plan/planner.h"
#include "coordinator/state/rendezvous.h"
#include "jobspec/job_spec.h"

namespace ringmaster::coordinator {

// A job file the coordinator accepts (and stores) is at most 256 KiB: the one limit that the
// trainer, `ringmaster local` and `ringmaster submit` apply too (jobspec/job_spec.h).
inline constexpr size_t kMaxJobYamlBytes = trainer::kMaxJobFileBytes;

struct JobRequirements {
  trainer::JobSpec spec;
  RendezvousOptions rendezvous;  // min/max from the spec, windows from the coordinator
  int max_restarts = 0;
  // procs_per_node, device, precision, compression, sharding, backend from the spec; the
  // caller fills job_id, generation, coordinator_address and master_port.
  PlanRequest plan;
};

// Parses `yaml` (at most kMaxJobYamlBytes) as submitted from `base_dir`, an absolute directory
// against which the spec's relative paths resolve. `source` names the file in errors ("job.yaml"
// when empty). `windows` supplies last_call and join_timeout; its node counts are ignored.
absl::StatusOr<JobRequirements> ParseJobRequirements(std::string_view yaml, std::string_view source,
                                                     std::string_view base_dir,
                                                     const RendezvousOptions& windows = {});

}  // namespace ringmaster::coordinator
