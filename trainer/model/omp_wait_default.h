// The OpenMP waiting policy of the CPU trainer: passive (a thread that reaches a barrier first
// sleeps at once instead of spinning) unless the environment says otherwise. libgomp's own
// default spins ~300k iterations at each barrier; beside one busy core those spins take the CPU
// the late thread needs, and a 2-thread trainer ran 4.7x slower than idle
// (scripts/bench-cpu-shared.sh; 1.6x with passive; docs/performance-cpu.md).
//
// libgomp reads its environment once, in its initialiser, before main (and before anything in
// the executable could set a variable that it would see). So ApplyOmpWaitDefault, first thing
// in main, re-executes the program (the file /proc/self/exe names, same pid, name and
// arguments) with OMP_WAIT_POLICY=passive and RINGMASTER_OMP_WAIT=passive, when none of
// OMP_WAIT_POLICY, GOMP_SPINCOUNT and RINGMASTER_OMP_WAIT is set. RINGMASTER_OMP_WAIT=spin
// keeps libgomp's own default. If the exec fails the program goes on with libgomp's default.
#pragma once

namespace ringmaster::trainer::cpu {

// Call at the start of main, before any other thread exists; returns only if no re-exec is
// needed (or it failed).
void ApplyOmpWaitDefault(char** argv);

// How this process's OpenMP waits, for logs and benchmark headers.
const char* OmpWaitPolicyDescription();

// True when the trainer's default (passive, RINGMASTER_OMP_WAIT=passive) applies, so that a
// benchmark can run another program (PyTorch) without it.
bool OmpWaitDefaultApplied();

}  // namespace ringmaster::trainer::cpu
