// What a run does with the checkpoints already in its output.dir (`train.resume`), in the
// spirit of Hugging Face's `resume_from_checkpoint` / `overwrite_output_dir`:
//
//   auto   (default) resume from the newest checkpoint when the run's trajectory settings are
//          those the checkpoint was written with; a difference fails the job (exit 3) naming
//          every differing key with its old and new value. No checkpoint: a fresh start.
//   never  start over: the previous run's checkpoints, final/, metrics.jsonl and ranks/ are
//          removed first (HF's overwrite_output_dir). Only on a job's first attempt: a restart
//          after a failure (TORCHELASTIC_RESTART_COUNT > 0) resumes this run's own checkpoints.
//   force  resume whatever changed, logging each difference.
//
// The trajectory settings are those that change which weights a run computes: the model and
// its initial weights, the training file (path and size) and how it is cut into global batches,
// the optimiser, the schedule and its length, the seed. Left out on purpose: how a global batch
// is split and computed — world size, micro_batch_size, sharding, device, precision, gradient
// compression, backend. They change rounding (and which dropout mask a row draws), not what is
// optimised; the coordinator also re-plans them per rank (precision and compression `auto`, the
// world size of an elastic job) when it restarts a job, and resuming across them is a feature
// (resharding, tests/dist_reshard.sh). Output and logging settings are left out too, and the
// evaluation settings unless early stopping or load_best_model_at_end is on (then they decide
// where training ends or what is exported). Settings added after checkpoints already existed
// are recorded only away from their defaults (or where they apply), so those checkpoints resume.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace ringmaster::trainer {

// Key path (as the job file writes it) -> value as text. Recorded in every checkpoint's
// manifest (CheckpointMeta::settings).
using RunSettings = std::map<std::string, std::string>;

// The trajectory settings of `job` (see above). Paths are as resolved; data.train carries the
// file's size ("<path> (<n> bytes)"), so a file rewritten in place counts as changed.
RunSettings TrajectorySettings(const JobSpec& job);

struct SettingChange {
  std::string key;
  std::string before;  // the checkpoint's; "(not set)" when it did not record the key
  std::string after;   // the job's; "(not set)" likewise
};

// Keys whose values differ between a checkpoint's settings and the job's, in key order.
std::vector<SettingChange> DiffSettings(const RunSettings& checkpoint, const RunSettings& job);

// "train.lr 0.001 -> 0.002, train.seed 5 -> 6".
std::string FormatChanges(const std::vector<SettingChange>& changes);

// The failure of resuming `checkpoint_dir` under changed settings (one line: an agent reports a
// trainer's last error line). FailedPrecondition, marked so that IsSettingsChanged knows it and
// `ringmaster-trainer train` exits kExitBadJob: restarting cannot help.
absl::Status SettingsChanged(const std::string& checkpoint_dir,
                             const std::vector<SettingChange>& changes);
bool IsSettingsChanged(const absl::Status& status);

// The failure of a resume that found checkpoints but could read none of them (`damaged`, the
// checkpoint directories, oldest first). Training again from step 0 would silently overwrite
// them, so the run stops instead (one line, naming each directory and how to start over);
// DataLoss, marked so that IsAllCheckpointsDamaged knows it and `ringmaster-trainer train`
// exits kExitBadJob: a restart finds the same damage.
absl::Status AllCheckpointsDamaged(const std::vector<std::string>& damaged);
bool IsAllCheckpointsDamaged(const absl::Status& status);

// The failure of a resume that found checkpoint directories (`orphans`, oldest first) but not
// one manifest (issue #31): starting over would overwrite them as silently as damaged ones. One
// line naming the checkpoint directory and each directory lacking its manifest, and how to start
// over. Marked like AllCheckpointsDamaged (IsAllCheckpointsDamaged is true): exit kExitBadJob.
absl::Status CheckpointsWithoutManifest(const std::string& checkpoint_root,
                                        const std::vector<std::string>& orphans);

// `status` (the failure of reading a checkpoint written for another model: its fingerprint
// differs from this job's) marked so that IsCheckpointOfAnotherModel knows it and
// `ringmaster-trainer train` exits kExitBadJob: every restart would read the same checkpoint
// (issue #31: it exited 1 and spent every restart).
absl::Status CheckpointOfAnotherModel(absl::Status status);
bool IsCheckpointOfAnotherModel(const absl::Status& status);

}  // namespace ringmaster::trainer
