// A rank's live figures in a small block of shared memory: the trainer writes it as it trains
// (every step, every collective it enters and leaves), its agent reads it without asking. The
// block is a file mapped by both (RINGMASTER_STATUS_FILE), so a rank that is stuck or stopped
// still shows where it is: the hang diagnosis reads which collective each rank entered last.
// A standalone trainer keeps the block in anonymous memory and serves it on /metrics.
//
// Every field is a lock-free 64-bit atomic (address-free, so safe across processes); the
// collective's number, name and entry time are read together under a sequence lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/collective_observer.h"
#include "common/trainer_metrics.h"

namespace ringmaster::trainer {

// Histogram upper bounds (seconds); one more bucket counts +Inf.
inline constexpr std::array<double, 13> kStepSecondsBounds = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60};
inline constexpr std::array<double, 10> kCheckpointSecondsBounds = {0.01, 0.05, 0.1, 0.5, 1,
                                                                    5,    10,   30,  60,  300};

struct HistogramFigures {
  std::vector<uint64_t> counts;  // per bucket (not cumulative), last one +Inf
  double sum = 0;
  uint64_t count = 0;
};

// A consistent-enough copy of the block (each figure is exact; the collective fields agree with
// each other; figures of different groups may be a step apart).
struct RankFigures {
  int64_t pid = 0;
  int64_t world_size = 0, steps_planned = 0;
  // The collective this rank entered last.
  uint64_t collective_seq = 0;  // 0: none yet, or unknown (no consistent copy could be read)
  Collective collective_op = Collective::kBarrier;
  bool in_collective = false;
  double collective_entered_unix = 0;                  // seconds
  std::array<double, kNumCollectives> comm_seconds{};  // total time inside, by collective
  // Training.
  int64_t steps_total = 0, step = 0;
  uint64_t samples_total = 0, tokens_total = 0;
  double data_wait_seconds = 0, loss = 0, learning_rate = 0, grad_norm = 0;
  double last_step_unix = 0;         // 0: no step yet
  uint64_t skipped_steps_total = 0;  // fp16 steps skipped for overflowed gradients
  double loss_scale = 0;             // fp16's current loss scale (0: no loss scaling)
  HistogramFigures step_seconds;
  bool has_eval = false;
  double eval_loss = 0, eval_accuracy = 0;
  HistogramFigures checkpoint_seconds;
  uint64_t checkpoint_bytes_total = 0;
  uint64_t gather_bytes = 0, reduce_raw_bytes = 0, reduce_wire_bytes = 0;
  bool has_memory = false;
  uint64_t state_persistent_bytes = 0, state_peak_transient_bytes = 0;
  bool has_device = false;  // the rank trains on a GPU
  DeviceFigures device;

  double comm_seconds_total() const;
};

struct RankStatusBlock;

class RankStatus : public TrainerMetrics, public CollectiveObserver {
 public:
  // The block in a file at `path` (created or truncated, mode 0644), mapped shared.
  static absl::StatusOr<std::unique_ptr<RankStatus>> CreateFile(const std::string& path);
  // The block in anonymous memory (a standalone trainer serving /metrics itself).
  static std::unique_ptr<RankStatus> CreateAnonymous();
  ~RankStatus() override;

  RankFigures Snapshot() const;

  // TrainerMetrics.
  void OnStart(int world_size, int64_t total_steps) override;
  void OnStep(const StepFigures& f, const CommTotals& comm) override;
  void OnEval(double loss, double accuracy) override;
  void OnCheckpoint(double seconds, uint64_t bytes) override;
  void OnMemory(uint64_t persistent_bytes, uint64_t peak_transient_bytes) override;
  void OnDevice(const DeviceFigures& device) override;

  // CollectiveObserver (called from whichever thread runs the collective).
  void OnEnter(uint64_t seq, Collective op) override;
  void OnLeave(uint64_t seq, Collective op, double seconds) override;

 private:
  RankStatus(RankStatusBlock* block, size_t length, bool anonymous);

  RankStatusBlock* block_;
  size_t length_;
};

// Reads a block another process writes. NotFound when there is no file yet; DataLoss when the
// file is not a status block (wrong magic or size) — a torn copy is retried, never returned.
absl::StatusOr<RankFigures> ReadRankStatusFile(const std::string& path);

}  // namespace ringmaster::trainer
