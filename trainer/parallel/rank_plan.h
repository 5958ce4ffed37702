// The coordinator's plan for one rank, as the trainer's input: RINGMASTER_PRECISION and
// RINGMASTER_COMPRESSION (parsed into DistEnv) applied to the job, after checking that this
// trainer's hardware can run them.
#pragma once

#include "absl/status/status.h"
#include "jobspec/job_spec.h"
#include "trainer/parallel/dist_env.h"

namespace ringmaster::trainer {

// Applies `env`'s plan to `job` (whose train.device is resolved: cpu or cuda):
//  - precision: the plan resolves `train.precision: auto` per rank (the planner passes an
//    explicit precision through unchanged). A plan this trainer cannot run, e.g.
//    RINGMASTER_PRECISION=bf16 for a CPU rank (the CPU engine computes in fp32 only), is
//    InvalidArgument naming the variable and the device: a bad job, not a restartable failure.
//  - compression: the plan's codec replaces the job's (it resolves `auto`; explicit settings
//    come through unchanged).
// Unset variables leave the job as it is.
absl::Status ApplyRankPlan(const DistEnv& env, JobSpec* job);

}  // namespace ringmaster::trainer
