// The emulator's bug detectors that need the scheduler's view of a block (see options.h for the
// list and how to turn each off):
//   bounds   dynamic shared memory gets a guard zone after its end, checked when the block ends;
//            device allocations get one too, checked after every launch (memory.cc).
//   race     shared-memory accesses recorded per barrier interval ("epoch"): two threads touching
//            one byte in one epoch, at least one writing, with no __syncthreads between (and no
//            warp barrier, for two lanes of one warp), is reported with both source lines.
//            Accesses are seen only in code compiled with the racecheck instrumentation
//            (CMake: cuda_emu_add_kernels(... RACECHECK)), which routes every load and store of
//            the kernel's translation unit through RecordSharedAccess.
//   global-race  the same for device memory within one launch: accesses of one block ordered by
//            its barriers, accesses of different blocks never (a byte one block writes and
//            another touches in the same launch is a race, unless only atomics touch it).
#pragma once

#include <cstddef>

#include "cuda_emu/scheduler.h"

namespace cuda_emu {

// Dynamic shared memory of a block: allocated (poisoned) with its guard zone before the block
// runs; the guard checked after. An overrun sets b.error.
void SharedMemoryBegin(Block& b);
void SharedMemoryEnd(Block& b);

// Static __shared__ variables, registered by the rewritten kernel source at their declaration
// (so the race detector knows them). file:line: the declaration (named if reached on the fast
// path, which has no shared memory).
void RegisterShared(const void* p, size_t bytes, const char* file = __builtin_FILE(),
                    int line = __builtin_LINE());

// Race detector state of a block: cleared when the block starts.
void RaceBlockBegin(Block& b);
// One load or store of `bytes` at `p` by the running lane; `pc` is the code address (reported as
// file:line). Ignored outside shared memory or kernels.
void RecordSharedAccess(const void* p, size_t bytes, bool write, const void* pc);

}  // namespace cuda_emu
