#include "trainer/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "trainer/io/safetensors.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

constexpr int kFormatVersion = 1;

std::string CheckpointRoot(const std::string& output_dir) {
  return (fs::path(output_dir) / "checkpoints").string();
}

absl::Status WriteTensors(const std::string& path, const ParamLayout& layout,
                          const std::vector<std::pair<std::string, const float*>>& groups) {
  std::vector<TensorToWrite> tensors;
  for (const auto& [prefix, base] : groups) {
    for (const ParamSpec& s : layout.specs) {
      tensors.push_back(
          {prefix + s.name, DType::kF32, s.shape, base + s.offset, s.numel * sizeof(float)});
    }
  }
  return WriteSafetensors(path, tensors);
}

// Reads one group of tensors (`prefix` + each layout name) from an open file.
absl::Status ReadTensors(const SafetensorsReader& reader, const ParamLayout& layout,
                         const std::string& prefix, std::vector<float>* out) {
  const std::string& path = reader.path();
  out->assign(layout.total, 0.0f);
  for (const ParamSpec& s : layout.specs) {
    const std::string name = prefix + s.name;
    const TensorInfo* t = reader.Find(name);
    if (t == nullptr) {
      return absl::DataLossError(absl::StrCat(path, ": checkpoint has no tensor '", name, "'"));
    }
    if (t->shape != s.shape) {
      return absl::DataLossError(
          absl::StrCat(path, ": tensor '", name, "' has a shape other than the model's"));
    }
    RM_RETURN_IF_ERROR(reader.ReadFloat(*t, out->data() + s.offset, s.numel));
  }
  return absl::OkStatus();
}

}  // namespace

std::string LayoutFingerprint(const ParamLayout& layout) {
  std::string out = absl::StrCat(layout.specs.size(), " tensors, ", layout.total, " floats");
  // FNV-1a over every tensor's name and shape.
  uint64_t h = 1469598103934665603ULL;
  for (const ParamSpec& s : layout.specs) {
    for (char c : s.name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
    for (int64_t d : s.shape) h = (h ^ static_cast<uint64_t>(d)) * 1099511628211ULL;
  }
  return absl::StrCat(out, ", ", absl::StrFormat("%016x", h));
}

absl::Status SaveCheckpoint(const std::string& output_dir, const ParamLayout& layout,
                            const TrainerState& state, const float* params, const float* exp_avg,
                            const float* exp_avg_sq, int keep) {
  const std::string root = CheckpointRoot(output_dir);
  RM_RETURN_IF_ERROR(MakeDirs(root));
  const std::string name = absl::StrFormat("step-%08d", state.step);
  const std::string final_dir = (fs::path(root) / name).string();
  const std::string tmp = (fs::path(root) / absl::StrCat(".tmp-", name, "-", ::getpid())).string();
  std::error_code ec;
  fs::remove_all(tmp, ec);
  RM_RETURN_IF_ERROR(MakeDirs(tmp));
  absl::Status s =
      WriteTensors((fs::path(tmp) / "model.safetensors").string(), layout, {{"", params}});
  if (s.ok()) {
    s = WriteTensors((fs::path(tmp) / "optimizer.safetensors").string(), layout,
                     {{"exp_avg.", exp_avg}, {"exp_avg_sq.", exp_avg_sq}});
  }
  if (s.ok()) {
    nlohmann::json j = {{"format_version", kFormatVersion},
                        {"step", state.step},
                        {"epoch", state.epoch},
                        {"cursor", state.cursor},
                        {"samples_seen", state.samples_seen},
                        {"seed", state.seed},
                        {"fingerprint", state.fingerprint}};
    s = WriteFileAtomic((fs::path(tmp) / "trainer_state.json").string(), j.dump(2) + "\n");
  }
  if (s.ok()) s = FsyncDir(tmp);
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    return absl::Status(s.code(),
                        absl::StrCat("checkpoint at step ", state.step,
                                     " not written (the previous one is intact): ", s.message()));
  }
  if (fs::exists(final_dir)) {
    // Same step saved again (e.g. a resumed run's final save): replace it.
    const std::string aside = final_dir + ".old";
    fs::remove_all(aside, ec);
    fs::rename(final_dir, aside, ec);
    fs::remove_all(aside, ec);
  }
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    return absl::InternalError(absl::StrCat("cannot rename checkpoint into ", final_dir));
  }
  RM_RETURN_IF_ERROR(FsyncDir(root));
  if (keep > 0) {
    std::vector<std::string> all = ListCheckpoints(output_dir);
    for (size_t i = 0; i + keep < all.size(); ++i) fs::remove_all(all[i], ec);
  }
  return absl::OkStatus();
}

std::vector<std::string> ListCheckpoints(const std::string& output_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root = CheckpointRoot(output_dir);
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && n.find('.') == std::string::npos &&
        fs::exists(e.path() / "trainer_state.json")) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

absl::StatusOr<CheckpointData> LoadCheckpoint(const std::string& dir, const ParamLayout& layout) {
  CheckpointData d;
  const std::string state_path = (fs::path(dir) / "trainer_state.json").string();
  RM_ASSIGN_OR_RETURN(std::string text, ReadFile(state_path, 1 << 20));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(state_path, ": not valid JSON"));
  }
  try {
    if (j.at("format_version").get<int>() != kFormatVersion) {
      return absl::DataLossError(absl::StrCat(state_path, ": unknown format_version"));
    }
    d.state.step = j.at("step").get<int64_t>();
    d.state.epoch = j.at("epoch").get<int>();
    d.state.cursor = j.at("cursor").get<int64_t>();
    d.state.samples_seen = j.at("samples_seen").get<int64_t>();
    d.state.seed = j.at("seed").get<uint64_t>();
    d.state.fingerprint = j.at("fingerprint").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(state_path, ": ", e.what()));
  }
  if (d.state.fingerprint != LayoutFingerprint(layout)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": checkpoint is of another model (",
                                                      d.state.fingerprint, ") than this job's (",
                                                      LayoutFingerprint(layout), ")"));
  }
  RM_ASSIGN_OR_RETURN(auto model,
                      SafetensorsReader::Open((fs::path(dir) / "model.safetensors").string()));
  RM_RETURN_IF_ERROR(ReadTensors(*model, layout, "", &d.params));
  RM_ASSIGN_OR_RETURN(auto optim,
                      SafetensorsReader::Open((fs::path(dir) / "optimizer.safetensors").string()));
  RM_RETURN_IF_ERROR(ReadTensors(*optim, layout, "exp_avg.", &d.exp_avg));
  RM_RETURN_IF_ERROR(ReadTensors(*optim, layout, "exp_avg_sq.", &d.exp_avg_sq));
  return d;
}

}  // namespace ringmaster::trainer
