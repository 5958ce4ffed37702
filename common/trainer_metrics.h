// What the training loop reports, as an interface: a no-op implementation here; RankStatus
// (rank_status.h) records it for the agent and for /metrics (metrics_server.h).
//
// Names follow docs/metrics.md's rules (ringmaster_ prefix, base units, _total counters); labels
// are bounded (ringmaster_job, rank, and op/wire for communication) — never a step. The catalogue
// is docs/metrics.md too.
#pragma once

#include <cstdint>
#include <memory>

namespace ringmaster::trainer {

struct StepFigures {
  int64_t step = 0;
  double loss = 0, learning_rate = 0, grad_norm = 0;
  double seconds = 0;            // wall time of the step
  double data_wait_seconds = 0;  // of which waiting for batches
  int64_t samples = 0;           // this rank's samples in the step
  int64_t tokens = 0;            // this rank's non-padding tokens in the step
  double unix_time = 0;          // when the step ended
  bool skipped = false;          // fp16: gradients overflowed, the update was skipped
  double loss_scale = 0;         // fp16: the loss scale the step used (0: no loss scaling)
};

// Totals since the start of the process (the reporter turns them into counter increments).
struct CommTotals {
  uint64_t gather_bytes = 0;
  uint64_t reduce_raw_bytes = 0, reduce_wire_bytes = 0;
};

// A rank that trains on a GPU: its device memory and the GPU time of its steps (CUDA events
// around the step's work on its stream; wall time minus this is host overhead and waiting).
struct DeviceFigures {
  uint64_t allocated_bytes = 0;       // device memory the engine holds now
  uint64_t peak_allocated_bytes = 0;  // the most it has held
  uint64_t arena_bytes = 0;           // of which the activation arena
  double step_seconds = 0;            // GPU time of the last step
  double busy_seconds_total = 0;      // GPU time of all steps since the start
  // GPU time inside collectives (CUDA events around each on the stream it runs on), of the last
  // step and of all steps. Backward's reductions run on a communication stream, so part of it
  // overlaps compute.
  double comm_seconds = 0;
  double comm_seconds_total = 0;
  // Exposed communication, the part not hidden: GPU time the compute stream waited for the
  // communication stream (CUDA events just before and after each wait) plus the collectives run
  // on the compute stream itself; of the last step and of all steps. 0 in a world of one.
  double exposed_comm_seconds = 0;
  double exposed_comm_seconds_total = 0;
};

class TrainerMetrics {
 public:
  virtual ~TrainerMetrics() = default;
  virtual void OnStart(int world_size, int64_t total_steps) = 0;
  virtual void OnStep(const StepFigures& f, const CommTotals& comm) = 0;
  virtual void OnEval(double loss, double accuracy) = 0;
  virtual void OnCheckpoint(double seconds, uint64_t bytes) = 0;
  virtual void OnMemory(uint64_t persistent_bytes, uint64_t peak_transient_bytes) = 0;
  virtual void OnDevice(const DeviceFigures& device) = 0;
};

std::unique_ptr<TrainerMetrics> MakeNullMetrics();

}  // namespace ringmaster::trainer
