// The training loop's checkpoints: writing one (the engine's state, the loop's position, the
// best model and early stopping), and on start resuming from the newest readable one as
// train.resume says, or starting over. Part of TrainLoop (train_loop.h).
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/read_beneath.h"
#include "common/status_macros.h"
#include "trainer/train/sharded_checkpoint.h"
#include "trainer/train/train_loop.h"
#include "trainer/train/train_loop_clock.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

// The loop's entries in a checkpoint's meta.extra (the engine's are its own).
constexpr char kBestModelKey[] = "best_model";
constexpr char kEarlyStoppedKey[] = "early_stopped";

// TensorBoard's default directory, <output.dir>/runs.
bool IsDefaultTensorBoardDir(const JobSpec& job) {
  return job.output.tensorboard_dir.empty() ||
         fs::path(job.output.tensorboard_dir).lexically_normal() ==
             (fs::path(job.output.dir) / "runs").lexically_normal();
}

}  // namespace

absl::Status TrainLoop::StartOver() {
  const fs::path out(job_.output.dir);
  if (leader()) {
    const std::vector<std::string> old = ListShardedCheckpoints(job_.output.dir);
    std::vector<std::string> removed;
    std::vector<std::string> names = {"checkpoints", "final", "ranks", "metrics.jsonl"};
    // The default TensorBoard directory holds only this job's events files. One set elsewhere
    // is left alone: the new file's SessionLog START hides the older steps from TensorBoard.
    if (IsDefaultTensorBoardDir(job_)) names.push_back("runs");
    for (const std::string& name : names) {
      std::error_code ec;
      if (!fs::exists(out / name, ec)) continue;
      // Through output.dir's handle, following no link (issue #31).
      if (absl::Status s = RemoveAllBeneath(job_.output.dir, (out / name).string()); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("train.resume: never: cannot remove: ", s.message()));
      }
      removed.push_back(name);
    }
    if (!removed.empty()) {
      LogInfo(
          absl::StrCat("train.resume: never: starting over in ", job_.output.dir,
                       "; removed the previous run's ", absl::StrJoin(removed, ", "),
                       old.empty() ? "" : absl::StrCat(" (newest checkpoint ", old.back(), ")")));
    }
  }
  // No rank reads or writes output.dir before rank 0 has cleared it.
  return engine_->Barrier();
}

absl::Status TrainLoop::RestoreLatest() {
  if (job_.train.resume == ResumeMode::kNever && world_.restart_count == 0) return StartOver();
  std::vector<std::string> all = ListShardedCheckpoints(job_.output.dir);
  // Newest first; a checkpoint any rank cannot read is skipped by all ranks together.
  std::vector<std::string> damaged;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    absl::StatusOr<LoadedShard> d = engine_->ReadCheckpoint(*it);
    if (!d.ok() && d.status().code() == absl::StatusCode::kFailedPrecondition) {
      return CheckpointOfAnotherModel(d.status());
    }
    if (d.ok()) {
      // Every rank reads the same manifest, so every rank decides alike.
      RunSettings recorded = d->meta.settings;
      if (recorded.empty()) {
        // Written before settings were recorded: only its seed is known.
        recorded = {{"train.seed", absl::StrCat(d->meta.seed)}};
        RunSettings seed_only = {{"train.seed", settings_.at("train.seed")}};
        const std::vector<SettingChange> changes = DiffSettings(recorded, seed_only);
        if (!changes.empty() && job_.train.resume != ResumeMode::kForce) {
          return SettingsChanged(*it, changes);
        }
      } else if (const std::vector<SettingChange> changes = DiffSettings(recorded, settings_);
                 !changes.empty()) {
        if (job_.train.resume != ResumeMode::kForce) return SettingsChanged(*it, changes);
        if (leader()) {
          LogWarning(absl::StrCat("train.resume: force: resuming ", *it,
                                  " although these settings changed (checkpoint -> this job): ",
                                  FormatChanges(changes)));
        }
      }
    }
    std::vector<float> bad = {d.ok() ? 0.0f : 1.0f};
    RM_RETURN_IF_ERROR(engine_->AllReduceSum(&bad));
    if (bad[0] > 0) {
      LogWarning(absl::StrCat("skipping damaged checkpoint: ",
                              d.ok() ? absl::StrCat(*it, ": unreadable on another rank")
                                     : std::string(d.status().message())));
      damaged.insert(damaged.begin(), *it);
      continue;
    }
    RM_RETURN_IF_ERROR(engine_->LoadCheckpoint(*d));
    // Absent from checkpoints written before the best model was tracked.
    const nlohmann::json& extra = d->meta.extra;
    if (extra.is_object() && extra.contains(kBestModelKey)) {
      RM_RETURN_IF_ERROR(best_.FromJson(extra.at(kBestModelKey)));
    }
    early_stopped_ = extra.is_object() && extra.contains(kEarlyStoppedKey) &&
                     extra.at(kEarlyStoppedKey).is_boolean() &&
                     extra.at(kEarlyStoppedKey).get<bool>();
    step_ = d->meta.step;
    epoch_ = d->meta.epoch;
    cursor_ = d->meta.cursor;
    samples_seen_ = d->meta.samples_seen;
    // Said once the run goes on (Run): a finished run resumes nothing.
    resumed_from_ =
        absl::StrCat("resumed from ", *it, " (step ", step_, ", epoch ", epoch_ + 1,
                     ", written by ", d->meta.world_size, " rank(s), now ", world_.world_size, ")");
    // Drop metric lines of steps after the checkpoint: they are about to be redone.
    const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
    // Through output.dir's handle, following no link (issue #31).
    absl::StatusOr<std::string> text = ReadFileBeneath(job_.output.dir, path, size_t{1} << 32);
    if (leader() && text.ok()) {
      std::string kept;
      size_t pos = 0;
      while (pos < text->size()) {
        size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        const std::string line = text->substr(pos, end - pos);
        pos = end + 1;
        nlohmann::json j = ParseJsonLimited(line, path).value_or(nlohmann::json());
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
            j["step"].get<int64_t>() <= step_) {
          kept += line + "\n";
          if (j.contains("eval_loss") && j["eval_loss"].is_number()) {
            restored_eval_step_ = j["step"].get<int64_t>();
            restored_eval_.loss = j["eval_loss"].get<double>();
            restored_eval_.accuracy = j.contains("eval_accuracy") && j["eval_accuracy"].is_number()
                                          ? j["eval_accuracy"].get<double>()
                                          : 0.0;
          }
        }
      }
      RM_RETURN_IF_ERROR(WriteFileAtomicBeneath(job_.output.dir, path, kept));
    }
    return absl::OkStatus();
  }
  // Checkpoints exist but none could be read: a fresh start would overwrite them one by one.
  if (!damaged.empty()) return AllCheckpointsDamaged(damaged);
  // Checkpoint directories whose manifests were all deleted: the same, said as such.
  if (all.empty()) {
    const std::vector<std::string> orphans = ListCheckpointsWithoutManifest(job_.output.dir);
    if (!orphans.empty()) {
      return CheckpointsWithoutManifest((fs::path(job_.output.dir) / "checkpoints").string(),
                                        orphans);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TrainLoop::AlreadyFinished() {
  if (step_ < plan_.total_steps && !early_stopped_) return false;
  // The export is written last, by rank 0: every rank must see it, or all train on together.
  const fs::path final_dir = fs::path(job_.output.dir) / "final";
  // Looked at below output.dir, following no link (issue #31): a link is not an export.
  auto regular = [&](const char* name) {
    absl::StatusOr<struct stat> st = StatBeneath(job_.output.dir, (final_dir / name).string());
    return st.ok() && S_ISREG(st->st_mode);
  };
  const bool exported = regular("config.json") && regular("model.safetensors");
  std::vector<float> seen = {exported ? 1.0f : 0.0f};
  RM_RETURN_IF_ERROR(engine_->AllReduceSum(&seen));
  return seen[0] >= static_cast<float>(world_.world_size);
}

absl::Status TrainLoop::Checkpoint() {
  CheckpointMeta meta;
  meta.step = step_;
  meta.epoch = epoch_;
  meta.cursor = cursor_;
  meta.samples_seen = samples_seen_;
  meta.seed = job_.train.seed;
  meta.world_size = world_.world_size;
  meta.settings = settings_;
  meta.extra[kBestModelKey] = best_.ToJson();
  meta.extra[kEarlyStoppedKey] = early_stopped_;
  if (job_.train.load_best_model_at_end) meta.protected_step = best_.best_step();
  const auto t0 = std::chrono::steady_clock::now();
  RM_ASSIGN_OR_RETURN(uint64_t bytes,
                      engine_->SaveCheckpoint(job_.output.dir, meta, job_.output.keep_checkpoints));
  metrics_->OnCheckpoint(SecondsSince(t0), bytes);
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
