// Emulator settings: the schedule (order of fibers inside a block and of blocks in a grid) and
// which bug detectors are on. Read once from the environment; tests may change them through
// MutableOptions() between launches (never during one).
//
//   CUDA_EMU_SCHEDULE=forward|reverse|random   order of runnable fibers in each round (forward)
//   CUDA_EMU_BLOCK_ORDER=forward|reverse|random order of blocks (default: as the schedule)
//   CUDA_EMU_SEED=<n>                           seed of the random orders (1)
//   CUDA_EMU_WORKERS=<n>                        OS threads running blocks (1)
//   CUDA_EMU_STACK_KB=<n>                       fiber stack size (64)
//   CUDA_EMU_DISABLE=name,name,...              detectors to turn off (names in kDetectorNames)
//   CUDA_EMU_DEVICES=<n>, CUDA_EMU_CC=6.1|7.0|8.0|9.0  see device_properties.h
//   CUDA_EMU_STREAMS=eager|lazy                 when stream work runs (eager; streams.h)
//   CUDA_EMU_FAST_PATH=1|0                      fiber-free kernels without fibers (1; scheduler.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda_emu {

enum class Schedule { kForward, kReverse, kRandom };

// Parses "forward" | "reverse" | "random"; false on anything else.
bool ParseSchedule(const std::string& s, Schedule* out);
const char* ScheduleName(Schedule s);

// One bit per detector; CUDA_EMU_DISABLE names them.
enum Detector : uint32_t {
  kLaunchShape = 1u << 0,      // block/grid limits, dynamic shared memory over the limit
  kKernelPointers = 1u << 1,   // kernel pointer arguments that are not device memory
  kMemcpyDirection = 1u << 2,  // cudaMemcpy pointers that contradict the cudaMemcpyKind
  kPoison = 1u << 3,           // never-written device memory (signalling-NaN fill, checked on D2H)
  kBarrier = 1u << 4,          // __syncthreads reached from different lines, or by part of a block
  kWarp = 1u << 5,             // warp collectives naming exited or missing lanes
  kBounds = 1u << 6,           // writes past the end of an allocation or of dynamic shared memory
  kRace = 1u << 7,             // shared-memory races between barriers (racecheck)
  kGlobalRace = 1u << 8,       // global-memory races within a launch (racecheck)
};
inline constexpr struct {
  Detector bit;
  const char* name;
} kDetectorNames[] = {{kLaunchShape, "launch"},     {kKernelPointers, "pointers"},
                      {kMemcpyDirection, "memcpy"}, {kPoison, "poison"},
                      {kBarrier, "barrier"},        {kWarp, "warp"},
                      {kBounds, "bounds"},          {kRace, "race"},
                      {kGlobalRace, "global-race"}};

struct Options {
  Schedule schedule = Schedule::kForward;
  Schedule block_order = Schedule::kForward;
  uint64_t seed = 1;
  int workers = 1;
  size_t stack_bytes = 64 << 10;
  uint32_t detectors = ~0u;  // all on
  // CUDA_EMU_HOST_GUARD=1: device allocations are page-mapped and inaccessible outside kernel
  // launches and cuda* memory calls, so host code dereferencing a device pointer faults and is
  // reported (memory.cc). Opt-in: not with the cuBLAS/NCCL stand-ins (their host code reads
  // device memory) nor under AddressSanitizer (which owns SIGSEGV).
  bool host_guard = false;
  // CUDA_EMU_STREAMS=lazy: work queued on a stream runs only when something waits for it (a
  // synchronize, an event wait, a blocking call), not at the call, so a missing cross-stream
  // dependency or a host read before its copy finished gives wrong results (streams.h).
  bool lazy_streams = false;
  // CUDA_EMU_FAST_PATH=0: every kernel on fibers, also those the rewrite step found fiber-free
  // (no barrier, warp collective or shared memory), which otherwise run each CUDA thread to
  // completion on the worker's own stack, in the same schedule (scheduler.h).
  bool fast_path = true;
  bool On(Detector d) const { return (detectors & d) != 0; }
};

// The process-wide options, parsed from the environment on first use. An unknown value is a
// fatal error naming the variable (a typo must not silently run the default schedule).
const Options& GetOptions();
Options& MutableOptions();

}  // namespace cuda_emu
