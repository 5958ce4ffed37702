// Training checkpoints: model + optimizer state + step + data cursor, written so that a crash
// never leaves a half checkpoint that looks complete.
//
//   <output.dir>/checkpoints/step-00000200/
//       model.safetensors       HF tensor names, fp32 (loadable as model weights)
//       optimizer.safetensors   exp_avg.<name>, exp_avg_sq.<name>
//       trainer_state.json      step, epoch, cursor, seed, samples, model fingerprint
//
// Everything is written into a hidden temporary directory, each file fsynced, then the
// directory is renamed into place and its parent fsynced: a checkpoint directory that exists
// under its final name is complete.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model/bert_params.h"

namespace ringmaster::trainer {

struct TrainerState {
  int64_t step = 0;          // optimizer steps completed
  int epoch = 0;             // epoch the next step belongs to
  int64_t cursor = 0;        // index of the next micro-batch in that epoch's plan
  int64_t samples_seen = 0;  // training samples consumed so far
  uint64_t seed = 0;         // job seed (data order and dropout derive from it and the step)
  std::string fingerprint;   // model shape, to refuse a checkpoint of another model
};

struct CheckpointData {
  TrainerState state;
  std::vector<float> params, exp_avg, exp_avg_sq;  // layout.total each
};

// Writes checkpoints/step-<step>/ under `output_dir`, then deletes the oldest beyond `keep`.
absl::Status SaveCheckpoint(const std::string& output_dir, const ParamLayout& layout,
                            const TrainerState& state, const float* params, const float* exp_avg,
                            const float* exp_avg_sq, int keep);

// Complete checkpoint directories under `output_dir`, oldest first.
std::vector<std::string> ListCheckpoints(const std::string& output_dir);

// Loads one checkpoint directory; every tensor is checked against `layout`.
absl::StatusOr<CheckpointData> LoadCheckpoint(const std::string& dir, const ParamLayout& layout);

// A short description of the layout's names and shapes, stored in checkpoints.
std::string LayoutFingerprint(const ParamLayout& layout);

}  // namespace ringmaster::trainer
