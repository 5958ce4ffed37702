// Exit statuses of ringmaster-trainer (and the launcher's child) that another process acts on:
// the agent reads them to tell the coordinator whether restarting can help. One definition each.
#pragma once

namespace ringmaster {

// The job itself is wrong (spec, paths, data, model files, a plan the hardware cannot run):
// a supervisor fails the job instead of restarting it.
inline constexpr int kExitBadJob = 3;
// The loss or gradients became NaN/inf; restarting from the last checkpoint would diverge again.
inline constexpr int kExitDiverged = 4;
// The child of ProcessLauncher could not exec the program (the shell's convention).
inline constexpr int kExitExecFailed = 127;
// Stopped by SIGTERM/SIGINT (128 + 15, as a shell reports it), after checkpointing if in the loop.
inline constexpr int kExitTerminated = 143;

}  // namespace ringmaster
