// The training loop's construction and its step loop (Run): plan, prefetch, micro-batches,
// divergence detection, and when to evaluate, checkpoint and stop. Part of TrainLoop
// (train_loop.h) with train_loop_plan.cc (each rank's share), train_loop_checkpoint.cc
// (checkpoints and resume), train_loop_eval.cc (evaluation, best model) and
// train_loop_report.cc (metrics.jsonl, TensorBoard, the export and per-rank report).
#include "trainer/train/train_loop.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/train/stop_notice.h"
#include "trainer/train/train_loop_clock.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

constexpr char kDivergedPayload[] = "ringmaster.dev/diverged";

// Dropout masks derive from (seed, step, micro-batch): a resumed run draws the same masks.
uint64_t DropoutSeed(uint64_t seed, int64_t step, int micro) {
  return cpu::Mix64(cpu::Mix64(seed ^ 0x5bd1e995ULL) ^ cpu::Mix64(static_cast<uint64_t>(step)) ^
                    static_cast<uint64_t>(micro));
}

}  // namespace

absl::Status Diverged(const std::string& message) {
  absl::Status s = absl::InternalError(message);
  s.SetPayload(kDivergedPayload, absl::Cord("1"));
  return s;
}

bool IsDiverged(const absl::Status& status) {
  return status.GetPayload(kDivergedPayload).has_value();
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

double TrainLoop::EpochReached() const {
  if (plan_.steps_per_epoch <= 0) return epoch_;
  const double epoch =
      epoch_ + static_cast<double>(cursor_) / static_cast<double>(plan_.steps_per_epoch);
  return std::round(epoch * 100.0) / 100.0;
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
  progress.SetLogEverySteps(job_.train.log_every_steps);
  stop_step_.store(step_ + 1);
  StopNotice stop_notice(stop, &stop_step_, [](const std::string& line) { LogInfo(line); });
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
        stop_step_.store(step_ + 1);
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
        // Past this check a stop takes effect after the next step.
        if (!stop_here) stop_step_.store(step_ + 2);
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
                               {"epoch", EpochReached()},
                               {"loss", sr.loss},
                               {"lr", lr},
                               {"grad_norm", sr.skipped ? 0.0 : sr.grad_norm}};
        if (sr.loss_scale > 0) line["loss_scale"] = sr.loss_scale;
        // The process's own GPU memory peak (CUDA engine: the bytes it has allocated), so that a
        // benchmark reads it from the process rather than from nvidia-smi, whose per-process
        // figures are empty inside a container's PID namespace.
        const EngineFigures ef = engine_->figures();
        if (ef.device) line["gpu_peak_allocated_bytes"] = ef.device->peak_allocated_bytes;
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
        progress.Update(step_, sr.loss, lr, n_total, EpochReached());
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
        metrics_->OnStep(fig, ef.comm);
        metrics_->OnMemory(ef.persistent_bytes, ef.peak_transient_bytes);
        if (ef.device) metrics_->OnDevice(*ef.device);
        const bool epoch_end = cursor_ >= plan_size;
        // load_best_model_at_end saves every evaluated model (HF requires its save steps to
        // coincide with its evaluation steps; here every evaluation is a save step).
        bool save_evaluated = false;
        if (!data_.eval.empty() && EvaluatesNow(epoch_end)) {
          bool is_best = false;
          RM_RETURN_IF_ERROR(EvaluateAndRank(EpochReached(), /*record=*/true, &result, &is_best));
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
        if (stopping) stop_notice.Flush();
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
    RM_RETURN_IF_ERROR(EvaluateAndRank(EpochReached(), /*record=*/restored_eval_step_ != step_,
                                       &result, &is_best));
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

}  // namespace ringmaster::trainer
