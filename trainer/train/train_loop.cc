#include "trainer/train/train_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/train/eval_metrics.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

constexpr char kDivergedPayload[] = "ringmaster.dev/diverged";
// The loop's entries in a checkpoint's meta.extra (the engine's are its own).
constexpr char kBestModelKey[] = "best_model";
constexpr char kEarlyStoppedKey[] = "early_stopped";

// Dropout masks derive from (seed, step, micro-batch): a resumed run draws the same masks.
uint64_t DropoutSeed(uint64_t seed, int64_t step, int micro) {
  return cpu::Mix64(cpu::Mix64(seed ^ 0x5bd1e995ULL) ^ cpu::Mix64(static_cast<uint64_t>(step)) ^
                    static_cast<uint64_t>(micro));
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// TensorBoard's default directory, <output.dir>/runs.
bool IsDefaultTensorBoardDir(const JobSpec& job) {
  return job.output.tensorboard_dir.empty() ||
         fs::path(job.output.tensorboard_dir).lexically_normal() ==
             (fs::path(job.output.dir) / "runs").lexically_normal();
}

}  // namespace

std::string TensorBoardDir(const JobSpec& job) {
  return job.output.tensorboard_dir.empty() ? (fs::path(job.output.dir) / "runs").string()
                                            : job.output.tensorboard_dir;
}

std::vector<ScalarValue> TensorBoardScalars(const nlohmann::json& line) {
  std::vector<ScalarValue> out;
  // An evaluation line repeats its step's epoch: one train/epoch point a step is enough.
  const bool eval = line.contains("eval_loss");
  for (const auto& [key, value] : line.items()) {
    if (key == "step" || (eval && key == "epoch") || !value.is_number()) continue;
    std::string tag;
    if (absl::StartsWith(key, "eval_")) {
      tag = absl::StrCat("eval/", key.substr(5));
    } else {
      tag = absl::StrCat("train/", key == "lr" ? "learning_rate" : key);
    }
    out.push_back({std::move(tag), value.get<float>()});
  }
  return out;
}

absl::Status Diverged(const std::string& message) {
  absl::Status s = absl::InternalError(message);
  s.SetPayload(kDivergedPayload, absl::Cord("1"));
  return s;
}

bool IsDiverged(const absl::Status& status) {
  return status.GetPayload(kDivergedPayload).has_value();
}

std::pair<size_t, size_t> SliceOf(const LoopWorld& world, size_t n, int rank) {
  const std::vector<double>& weights = world.rank_weights;
  if (weights.empty()) {
    const size_t w = static_cast<size_t>(world.world_size), r = static_cast<size_t>(rank);
    return {n * r / w, n * (r + 1) / w};
  }
  // Proportional to the weights: boundaries at the rounded cumulative shares.
  double total = 0, before = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += weights[i];
    if (static_cast<int>(i) < rank) before += weights[i];
  }
  auto at = [&](double cum) {
    return std::min(n, static_cast<size_t>(std::llround(static_cast<double>(n) * cum / total)));
  };
  return {at(before), at(before + weights[rank])};
}

TrainPlan MakeTrainPlan(const JobSpec& job, const LoopWorld& world,
                        const std::vector<uint32_t>& train_keys) {
  TrainPlan p;
  // Every rank runs the same number of micro-batches: enough for the largest share.
  size_t largest = 0;
  for (int r = 0; r < world.world_size; ++r) {
    const auto [b, e] = SliceOf(world, static_cast<size_t>(job.train.global_batch_size), r);
    largest = std::max(largest, e - b);
  }
  const size_t mbs = static_cast<size_t>(job.train.micro_batch_size);
  p.accumulation = std::max<int>(1, static_cast<int>((largest + mbs - 1) / mbs));
  p.steps_per_epoch = static_cast<int64_t>(
      PlanEpoch(train_keys, job.train.global_batch_size, job.data.shuffle, job.train.seed, 0)
          .size());
  p.total_steps =
      job.train.max_steps > 0 ? job.train.max_steps : p.steps_per_epoch * job.train.epochs;
  p.schedule.kind = job.train.lr_schedule;
  p.schedule.base_lr = job.train.lr;
  p.schedule.total_steps = p.total_steps;
  p.schedule.lr_end = job.train.lr_end;
  p.schedule.power = job.train.lr_power;
  p.schedule.warmup_steps =
      WarmupSteps(job.train.warmup_steps, job.train.warmup_ratio, p.total_steps);
  return p;
}

std::vector<std::vector<int64_t>> ShareOf(const JobSpec& job, const LoopWorld& world,
                                          const TrainPlan& plan,
                                          const std::vector<int64_t>& global) {
  const auto [b, e] = SliceOf(world, global.size(), world.rank);
  std::vector<std::vector<int64_t>> micro(plan.accumulation);
  const size_t mbs = static_cast<size_t>(job.train.micro_batch_size);
  for (size_t i = b, k = 0; i < e; i += mbs, ++k) {
    // Rounding can leave a weighted share a few rows over `accumulation` micro-batches: the
    // last micro-batch takes them.
    std::vector<int64_t>& dst = micro[std::min<size_t>(k, micro.size() - 1)];
    dst.insert(dst.end(), global.begin() + i, global.begin() + std::min(e, i + mbs));
  }
  return micro;
}

TrainLoop::TrainLoop(JobSpec job, LoopWorld world, TrainData data, TrainPlan plan,
                     std::unique_ptr<StepEngine> engine, ExportModel export_model)
    : job_(std::move(job)),
      world_(std::move(world)),
      data_(std::move(data)),
      plan_(std::move(plan)),
      engine_(std::move(engine)),
      export_model_(std::move(export_model)),
      settings_(TrajectorySettings(job_)),
      best_(job_.train) {}

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
      fs::remove_all(out / name, ec);
      if (ec) {
        return absl::InternalError(absl::StrCat("train.resume: never: cannot remove ",
                                                (out / name).string(), ": ", ec.message()));
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
    if (!d.ok() && d.status().code() == absl::StatusCode::kFailedPrecondition) return d.status();
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
    absl::StatusOr<std::string> text = ReadFile(path);
    if (leader() && text.ok()) {
      std::string kept;
      size_t pos = 0;
      while (pos < text->size()) {
        size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        const std::string line = text->substr(pos, end - pos);
        pos = end + 1;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
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
  return absl::OkStatus();
}

absl::StatusOr<bool> TrainLoop::AlreadyFinished() {
  if (step_ < plan_.total_steps && !early_stopped_) return false;
  // The export is written last, by rank 0: every rank must see it, or all train on together.
  const fs::path final_dir = fs::path(job_.output.dir) / "final";
  std::error_code ec;
  const bool exported = fs::is_regular_file(final_dir / "config.json", ec) &&
                        fs::is_regular_file(final_dir / "model.safetensors", ec);
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

absl::Status TrainLoop::AppendMetrics(const nlohmann::json& line, std::vector<ScalarValue> extra) {
  if (!leader()) return absl::OkStatus();
  const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
  // Below output.dir nothing is written through a link (issue #20): a metrics.jsonl planted as
  // a link to a file elsewhere is refused, not appended to.
  RM_RETURN_IF_ERROR(AppendFileBeneath(job_.output.dir, path, line.dump() + "\n"));
  if (tensorboard_ != nullptr) {
    std::vector<ScalarValue> scalars = TensorBoardScalars(line);
    for (ScalarValue& v : extra) scalars.push_back(std::move(v));
    tensorboard_->AddScalars(line.at("step").get<int64_t>(), UnixNow(), scalars);
    tensorboard_->Flush();
  }
  return absl::OkStatus();
}

void TrainLoop::OpenTensorBoard() {
  if (!leader() || !job_.output.tensorboard) return;
  const std::string dir = TensorBoardDir(job_);
  // Below output.dir no link is followed (issue #20); elsewhere, under an agent's
  // --allowed-root, the directory must lie below that root, as output.dir does.
  std::string root;
  const std::string rel = fs::path(dir).lexically_relative(job_.output.dir).string();
  const char* allowed = std::getenv("RINGMASTER_ALLOWED_ROOT");
  if (!rel.empty() && !absl::StartsWith(rel, "..")) {
    root = job_.output.dir;
  } else if (allowed != nullptr && *allowed != '\0') {
    root = allowed;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> w =
      TensorBoardWriter::Create(root, dir, UnixNow(), host);
  if (!w.ok()) {
    LogWarning(absl::StrCat("output.tensorboard: cannot write TensorBoard events in ", dir, ": ",
                            w.status().message(),
                            "; training goes on without them (metrics.jsonl has every figure)"));
    return;
  }
  tensorboard_ = *std::move(w);
  // A resumed run redoes the steps after its checkpoint: TensorBoard drops what the earlier
  // files hold of them, as metrics.jsonl dropped their lines.
  tensorboard_->AddSessionStart(step_ + 1, UnixNow());
  tensorboard_->Flush();
  LogInfo(absl::StrCat("TensorBoard events: ", tensorboard_->path(), " (tensorboard --logdir ", dir,
                       ")"));
}

absl::StatusOr<TrainResult> TrainLoop::Run(const std::atomic<bool>* stop) {
  RM_RETURN_IF_ERROR(RestoreLatest());
  TrainResult result;
  RM_ASSIGN_OR_RETURN(const bool finished, AlreadyFinished());
  if (finished) {
    result.already_finished = true;
    result.steps = step_;
    result.export_dir = (fs::path(job_.output.dir) / "final").string();
    if (restored_eval_step_ >= 0) {
      result.eval = restored_eval_;
      result.eval.examples = static_cast<int64_t>(data_.eval.size());
      result.eval_step = restored_eval_step_;
    }
    result.early_stopped = early_stopped_;
    if (job_.train.load_best_model_at_end && best_.best_step() >= 0) {
      result.eval = best_.best_eval();
      result.eval_step = best_.best_step();
      result.best_model = true;
    }
    if (leader()) {
      LogInfo(absl::StrCat("training already finished (step ", step_, " of ", plan_.total_steps,
                           "); the model is in ", result.export_dir, "; nothing to do"));
    }
    return result;
  }
  // The job this run trains, recorded once the resume decision is made: a refused run leaves
  // the previous run's record as it was.
  if (leader()) {
    if (!resumed_from_.empty()) LogInfo(resumed_from_);
    RM_RETURN_IF_ERROR(WriteFileAtomicBeneath(
        job_.output.dir, (fs::path(job_.output.dir) / "job.yaml").string(), JobSpecToYaml(job_)));
    OpenTensorBoard();
  }
  const int64_t start_step = step_, start_samples = samples_seen_;
  const int32_t pad = data_.pad_id;
  const int world = world_.world_size;
  const int accumulation = plan_.accumulation;
  const int64_t total_steps = plan_.total_steps;
  if (leader()) {
    LogInfo(absl::StrFormat(
        "training %s: %d train rows, %d eval rows, %lld parameters, %d epochs x %lld steps "
        "(global batch %d = %d rank(s) x %d accumulation x micro-batch %d, sharding %s, "
        "compression %s), total %lld steps",
        job_.name, data_.train->size(), data_.eval.size(),
        static_cast<long long>(engine_->num_params()), job_.train.epochs,
        static_cast<long long>(plan_.steps_per_epoch), job_.train.global_batch_size, world,
        accumulation, job_.train.micro_batch_size,
        std::string(jobspec::SettingName(job_.distributed.sharding)),
        std::string(jobspec::SettingName(job_.distributed.compression)),
        static_cast<long long>(total_steps)));
  }
  if (!world_.rank_weights.empty()) {
    const size_t gb = static_cast<size_t>(job_.train.global_batch_size);
    const auto [b, e] = SliceOf(world_, gb, world_.rank);
    LogInfo(absl::StrFormat("rank %d takes %d of every %d samples (RINGMASTER_RANK_WEIGHTS)",
                            world_.rank, static_cast<int>(e - b), static_cast<int>(gb)));
  }
  ProgressReporter progress("train", total_steps, step_, leader() && ::isatty(2) != 0);
  metrics_->OnStart(world, total_steps);
  const auto t0 = std::chrono::steady_clock::now();
  bool saved_at_step = false;
  const uint64_t seed = job_.train.seed;
  while (step_ < total_steps && !early_stopped_) {
    const auto plan =
        PlanEpoch(data_.train_keys, job_.train.global_batch_size, job_.data.shuffle, seed, epoch_);
    const int64_t plan_size = static_cast<int64_t>(plan.size());
    // This rank's micro-batches from the cursor on, `accumulation` per step.
    std::vector<std::vector<int64_t>> mine;
    std::vector<int64_t> step_sizes;
    for (int64_t g = cursor_; g < plan_size; ++g) {
      for (auto& mb : ShareOf(job_, world_, plan_, plan[g])) mine.push_back(std::move(mb));
      step_sizes.push_back(static_cast<int64_t>(plan[g].size()));
    }
    {
      // The producer thread reads and tokenises this rank's rows of the next batches (and no
      // others) while the engine computes.
      const std::function<std::vector<int32_t>(std::string_view)> encode =
          [this](std::string_view text) {
            encoded_train_rows_.fetch_add(1, std::memory_order_relaxed);
            return data_.encode(text);
          };
      const PairEncoder encode_pair = [this](std::string_view a, std::string_view b,
                                             std::vector<int32_t>* types) {
        encoded_train_rows_.fetch_add(1, std::memory_order_relaxed);
        return data_.encode_pair(a, b, types);
      };
      const size_t count = mine.size();
      BatchPrefetcher pf(
          count,
          [this, mine = std::move(mine), encode, encode_pair, pad](size_t i) {
            return data_.encode_pair ? MakeIndexedBatch(*data_.train, mine[i], encode_pair, pad)
                                     : MakeIndexedBatch(*data_.train, mine[i], encode, pad);
          },
          /*depth=*/4);
      int64_t k = 0;  // steps taken from this plan
      while (cursor_ < plan_size && step_ < total_steps && !early_stopped_) {
        const int64_t n_total = step_sizes[k++];
        const auto step_start = std::chrono::steady_clock::now();
        StepFigures fig;
        engine_->BeginStep();
        double loss = 0;
        for (int i = 0; i < accumulation; ++i) {
          const auto wait_start = std::chrono::steady_clock::now();
          std::optional<Batch> batch = pf.Next();
          fig.data_wait_seconds += SecondsSince(wait_start);
          if (!batch) {
            RM_RETURN_IF_ERROR(pf.status());
            return absl::InternalError("data pipeline ended early");
          }
          fig.samples += batch->batch_size;
          for (float mask : batch->attention_mask) fig.tokens += mask > 0 ? 1 : 0;
          const bool last = i + 1 == accumulation;
          if (batch->batch_size == 0) {
            engine_->EmptyMicroBatch(last);
            continue;
          }
          MicroBatchArgs args;
          args.last_of_step = last;
          args.loss_weight = static_cast<float>(batch->batch_size) / static_cast<float>(n_total);
          args.dropout_seed = DropoutSeed(seed, step_, world_.rank * accumulation + i);
          RM_ASSIGN_OR_RETURN(const float l, engine_->TrainMicroBatch(*batch, args));
          loss += static_cast<double>(l) * args.loss_weight;
        }
        RM_RETURN_IF_ERROR(engine_->status());
        const double lr = plan_.schedule.LrAt(step_);
        const bool stop_here = stop != nullptr && stop->load();
        RM_ASSIGN_OR_RETURN(
            const StepTotals sr,
            engine_->FinishStep(loss, lr, job_.train.max_grad_norm, stop_here ? 1.0f : 0.0f));
        if (!std::isfinite(sr.loss) || (!sr.skipped && !std::isfinite(sr.grad_norm))) {
          // fp32 has no loss scale to lower: the step cannot be skipped and retried. Nothing of
          // this step is checkpointed; the last committed checkpoint stays the latest.
          return Diverged(
              absl::StrCat(std::isfinite(sr.loss) ? absl::StrCat("gradient norm is ", sr.grad_norm)
                                                  : absl::StrCat("loss is ", sr.loss),
                           " at step ", step_ + 1, " (fp32): training diverged; stopping"));
        }
        ++step_;
        ++cursor_;
        samples_seen_ += n_total;
        saved_at_step = false;
        nlohmann::json line = {{"step", step_},
                               {"epoch", epoch_ + 1},
                               {"loss", sr.loss},
                               {"lr", lr},
                               {"grad_norm", sr.skipped ? 0.0 : sr.grad_norm}};
        if (sr.loss_scale > 0) line["loss_scale"] = sr.loss_scale;
        if (sr.skipped) {
          line["skipped"] = true;
          progress.Message(absl::StrFormat(
              "step %d: fp16 gradients overflowed at loss scale %g; step skipped, scale halved",
              step_, sr.loss_scale));
        }
        // The whole job's samples over rank 0's step time, as TensorBoard's throughput.
        const double step_seconds = SecondsSince(step_start);
        RM_RETURN_IF_ERROR(AppendMetrics(
            line, {{"train/samples_per_second",
                    static_cast<float>(static_cast<double>(n_total) / step_seconds)}}));
        progress.Update(step_, sr.loss, lr, n_total);
        fig.step = step_;
        fig.loss = sr.loss;
        fig.learning_rate = lr;
        fig.grad_norm = sr.grad_norm;
        fig.skipped = sr.skipped;
        fig.loss_scale = sr.loss_scale;
        if (sr.skipped) ++skipped_steps_;
        fig.seconds = SecondsSince(step_start);
        fig.unix_time =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        const EngineFigures ef = engine_->figures();
        metrics_->OnStep(fig, ef.comm);
        metrics_->OnMemory(ef.persistent_bytes, ef.peak_transient_bytes);
        if (ef.device) metrics_->OnDevice(*ef.device);
        const bool epoch_end = cursor_ >= plan_size;
        // load_best_model_at_end saves every evaluated model (HF requires its save steps to
        // coincide with its evaluation steps; here every evaluation is a save step).
        bool save_evaluated = false;
        if (!data_.eval.empty() && EvaluatesNow(epoch_end)) {
          bool is_best = false;
          RM_RETURN_IF_ERROR(EvaluateAndRank(epoch_ + 1, /*record=*/true, &result, &is_best));
          progress.Message(absl::StrCat(
              absl::StrFormat("epoch %d (step %d): eval loss %.4f accuracy %.4f (%d rows)",
                              epoch_ + 1, step_, result.eval.loss, result.eval.accuracy,
                              result.eval.examples),
              EvalFiguresText(result.eval),
              is_best ? absl::StrCat("; the best so far by ", best_.metric()) : ""));
          save_evaluated = job_.train.load_best_model_at_end;
          if (best_.ShouldStop() && step_ < total_steps) {
            early_stopped_ = true;  // recorded in the checkpoint saved below
            progress.Message(absl::StrCat("early stopping at step ", step_, " of ", total_steps,
                                          ": ", best_.StopReason()));
          }
        }
        if (epoch_end) {
          ++epoch_;
          cursor_ = 0;
        }
        // Any rank asked to stop stops every rank (they all must join the checkpoint).
        const bool stopping = sr.flag_sum > 0;
        const bool periodic = job_.output.checkpoint_every_steps > 0 &&
                              step_ % job_.output.checkpoint_every_steps == 0;
        if (periodic || stopping || save_evaluated || early_stopped_) {
          RM_RETURN_IF_ERROR(Checkpoint());
          saved_at_step = true;
        }
        if (stopping) {
          progress.Finish();
          LogInfo(absl::StrCat("stopped by signal at step ", step_, "; checkpoint saved"));
          result.steps = step_;
          result.interrupted = true;
          return result;
        }
        if (cursor_ == 0) break;  // epoch finished: the next one has its own plan
      }
    }
  }
  progress.Finish();
  const double train_seconds = SecondsSince(t0);
  // The figures reported are those of the weights exported: when the last step was not an
  // epoch end (max_steps) the last epoch's evaluation is of older weights, so evaluate these.
  if (!data_.eval.empty() && (result.eval.examples == 0 || result.eval_step != step_)) {
    // The epoch it belongs to: the one in progress, or the last one finished. A resumed run
    // whose final evaluation metrics.jsonl already holds does not write it twice. It is ranked
    // like any evaluation: with load_best_model_at_end the final weights are a candidate too.
    bool is_best = false;
    RM_RETURN_IF_ERROR(EvaluateAndRank(cursor_ > 0 ? epoch_ + 1 : epoch_,
                                       /*record=*/restored_eval_step_ != step_, &result, &is_best));
    if (leader()) {
      LogInfo(absl::StrCat(
          absl::StrFormat("final weights (step %d): eval loss %.4f accuracy %.4f (%d rows)", step_,
                          result.eval.loss, result.eval.accuracy, result.eval.examples),
          EvalFiguresText(result.eval)));
    }
  }
  if (tensorboard_ != nullptr && train_seconds > 0) {
    // The HF Trainer's end-of-training figures, of this run (a resumed run's own steps).
    const double steps = static_cast<double>(step_ - start_step);
    const double samples = static_cast<double>(samples_seen_ - start_samples);
    tensorboard_->AddScalars(
        step_, UnixNow(),
        {{"train/train_runtime", static_cast<float>(train_seconds)},
         {"train/train_samples_per_second", static_cast<float>(samples / train_seconds)},
         {"train/train_steps_per_second", static_cast<float>(steps / train_seconds)}});
    tensorboard_->Flush();
  }
  if (!saved_at_step) RM_RETURN_IF_ERROR(Checkpoint());
  result.early_stopped = early_stopped_;
  if (job_.train.load_best_model_at_end && !data_.eval.empty()) {
    RM_RETURN_IF_ERROR(LoadBestModel(&result));
  }
  RM_RETURN_IF_ERROR(Finish(train_seconds, &result));
  return result;
}

absl::Status TrainLoop::Finish(double train_seconds, TrainResult* result) {
  result->steps = step_;
  result->export_dir = (fs::path(job_.output.dir) / "final").string();
  std::vector<float> full;
  RM_RETURN_IF_ERROR(engine_->GatherFullParams(&full));
  if (leader()) {
    RM_RETURN_IF_ERROR(export_model_(result->export_dir, full.data()));
    LogInfo(absl::StrCat("exported ", result->export_dir));
  }
  const EngineFigures ef = engine_->figures();
  metrics_->OnMemory(ef.persistent_bytes, ef.peak_transient_bytes);
  if (ef.device) {
    metrics_->OnDevice(*ef.device);
    LogInfo(absl::StrFormat(
        "rank %d: GPU memory %.1f MiB allocated (%.1f MiB activation arena), %.1f MiB peak; GPU "
        "busy %.2f s of %.2f s training, %.2f s of it in collectives, %.2f s of communication "
        "exposed (not hidden behind compute)",
        world_.rank, ef.device->allocated_bytes / 1048576.0, ef.device->arena_bytes / 1048576.0,
        ef.device->peak_allocated_bytes / 1048576.0, ef.device->busy_seconds_total, train_seconds,
        ef.device->comm_seconds_total, ef.device->exposed_comm_seconds_total));
  }
  LogInfo(absl::StrFormat(
      "rank %d: state memory %.1f MiB persistent + %.1f MiB peak transient; sent %.1f MiB "
      "gathers, %.1f MiB reductions (%.1f MiB as fp32)",
      world_.rank, ef.persistent_bytes / 1048576.0, ef.peak_transient_bytes / 1048576.0,
      ef.comm.gather_bytes / 1048576.0, ef.comm.reduce_wire_bytes / 1048576.0,
      ef.comm.reduce_raw_bytes / 1048576.0));
  // Per-rank figures for benchmarks and tests: output.dir/ranks/rank-<r>.json.
  const fs::path ranks_dir = fs::path(job_.output.dir) / "ranks";
  RM_RETURN_IF_ERROR(MakeDirsBeneath(job_.output.dir, ranks_dir.string()));
  nlohmann::json stats = {
      {"rank", world_.rank},
      {"world_size", world_.world_size},
      {"sharding", std::string(jobspec::SettingName(job_.distributed.sharding))},
      {"compression", std::string(jobspec::SettingName(job_.distributed.compression))},
      {"persistent_state_bytes", ef.persistent_bytes},
      {"peak_transient_bytes", ef.peak_transient_bytes},
      {"gather_bytes", ef.comm.gather_bytes},
      {"reduce_wire_bytes", ef.comm.reduce_wire_bytes},
      {"reduce_raw_bytes", ef.comm.reduce_raw_bytes},
      {"steps", step_},
      {"skipped_steps", skipped_steps_},
      {"train_seconds", train_seconds},
      {"train_rows", data_.train->size()},
      {"encoded_train_rows", encoded_train_rows_.load()}};
  if (ef.device) {
    stats["gpu"] = {{"allocated_bytes", ef.device->allocated_bytes},
                    {"peak_allocated_bytes", ef.device->peak_allocated_bytes},
                    {"arena_bytes", ef.device->arena_bytes},
                    {"busy_seconds", ef.device->busy_seconds_total},
                    {"comm_seconds", ef.device->comm_seconds_total},
                    {"exposed_comm_seconds", ef.device->exposed_comm_seconds_total}};
  }
  RM_RETURN_IF_ERROR(WriteFileAtomicBeneath(
      job_.output.dir, (ranks_dir / absl::StrCat("rank-", world_.rank, ".json")).string(),
      stats.dump(2) + "\n"));
  return engine_->Barrier();  // nobody exits before the export is written
}

}  // namespace ringmaster::trainer
