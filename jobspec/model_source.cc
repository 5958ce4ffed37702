#include "jobspec/model_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ringmaster::jobspec {

absl::Status CheckInitFromDirectory(const trainer::JobSpec& spec) {
  const std::string& dir = spec.model.init_from;
  if (dir.empty()) return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return absl::OkStatus();
  // The name as a hub would know it: the path's last component(s) are what the user wrote
  // relative to the job file; "NAME" keeps the advice short when that is unclear.
  const std::filesystem::path p(dir);
  const std::string name = p.filename().string().empty() ? "NAME" : p.filename().string();
  return absl::InvalidArgumentError(absl::StrCat(
      spec.source.empty() ? "job" : spec.source, ": model.init_from: no directory at ", dir,
      ". model.init_from names a local Hugging Face model directory (config.json, "
      "model.safetensors, vocab.txt); Ringmaster does not download from the Hugging Face hub. "
      "If '",
      name,
      "' is a hub name, save it once where the job can read it: python3 -c "
      "\"from transformers import AutoModelForSequenceClassification as M, AutoTokenizer as T; "
      "[c.from_pretrained('",
      name, "').save_pretrained('models/", name,
      "') for c in (M, T)]\" and set model.init_from: models/", name,
      " (a path relative to the job file)"));
}

}  // namespace ringmaster::jobspec
