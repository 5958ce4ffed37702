// The NCCL stand-in of the CUDA emulator: the real <nccl.h> declares the functions, this
// library (CMake target cuda_emu_nccl) defines them for ranks that are processes (or threads)
// on one machine, whose "device" memory is the emulated runtime's host memory.
//
// Design (docs/cuda-stand-ins.md has the user's view):
//  - ncclGetUniqueId writes a fresh POSIX shared-memory name into the id. The first rank to
//    reach ncclCommInitRank creates the segment, the others map it; the last rank to join
//    unlinks the name, so nothing is left in /dev/shm once a communicator is up (an aborted or
//    destroyed, never-completed communicator unlinks it too).
//  - A collective is cut into chunks that fit the per-rank staging slot. Per chunk each rank
//    copies its input into its slot and arrives at a barrier (a per-rank phase counter); when
//    all have arrived it checks that every rank issued the same collective (sequence number,
//    kind, count, type, op, root), computes its output by reducing the slots in rank order
//    0, 1, ..., n-1 (so every rank computes bit-identical results), and arrives at a second
//    barrier before the slots are reused.
//  - Reductions: ncclSum and ncclMax. fp32 adds in fp32; fp16 and bf16 are widened to fp32,
//    summed in rank order in fp32 and rounded to the type once (round to nearest even) —
//    real NCCL rounds its partial sums along its ring or tree, so its low bits can differ;
//    integers wrap modulo 2^bits.
//  - ncclSend/ncclRecv go through one slot per ordered pair of ranks (sent/consumed counters),
//    FIFO per pair. Between ncclGroupStart and ncclGroupEnd calls are queued and run together
//    at the outermost ncclGroupEnd, so send/recv pairs cannot deadlock.
//  - Nothing waits forever: a wait for a peer fails with ncclRemoteError when the peer's
//    process has exited, when it destroyed or aborted its communicator, or after
//    NCCL_EMU_TIMEOUT_S seconds (default 60). The communicator then keeps that error
//    (ncclCommGetAsyncError, ncclGetLastError names the op and the missing ranks) and every
//    later call on it returns it; ncclCommAbort releases the rank.
//  - Blocking communicators (the default) finish each call (or group) before returning.
//    Non-blocking ones (ncclConfig_t::blocking = 0) return ncclInProgress and advance when
//    ncclCommGetAsyncError is polled, as real NCCL asks callers to do; initialisation too.
//  - Buffers must lie inside one cudaMalloc allocation of the communicator's device.
#pragma once

#include <nccl.h>
