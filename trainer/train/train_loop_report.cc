// What the training loop reports: metrics.jsonl lines and their TensorBoard scalars, the
// TensorBoard events file, and at the end the export, the memory and communication figures and
// the per-rank report (output.dir/ranks/rank-<r>.json). Part of TrainLoop (train_loop.h).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"
#include "trainer/train/train_loop.h"
#include "trainer/train/train_loop_clock.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

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
  const std::string allowed = AllowedRoot();
  if (!rel.empty() && !absl::StartsWith(rel, "..")) {
    root = job_.output.dir;
  } else if (!allowed.empty()) {
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
