// The job spec's enum-like settings as C++ enums, each with one name table: the names the YAML
// uses, the order errors list them in, and the name printed back (JobSpecToYaml, logs, JSON).
// A setting is parsed once, at the edge (ParseJobSpec, DistEnvFromProcess); everything after
// compares enums, never strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::jobspec {

// distributed.sharding (data_parallel.h says what each does).
enum class Sharding { kNoShard, kShardGradOp, kFullShard, kHybridShard };
// distributed.compression: the job's request. The trainer maps it to a wire codec or PowerSGD
// (trainer/parallel/data_parallel.h, CompressionOptions) in one place.
enum class Compression { kAuto, kNone, kFp16, kBf16, kInt8, kPowerSgd };
// train.precision; the planner resolves kAuto per rank (RINGMASTER_PRECISION).
enum class Precision { kAuto, kFp32, kFp16, kBf16 };
// distributed.backend.
enum class Backend { kAuto, kNccl, kGloo };
// train.lr_schedule.
enum class LrScheduleKind { kLinear, kConstant, kCosine, kPolynomial };
// train.eval_strategy: when evaluations run during training (HF's eval_strategy).
enum class EvalStrategy { kEpoch, kSteps, kNo };
// train.device.
enum class Device { kCpu, kCuda, kAuto };
// train.resume: what a run does with the checkpoints already in its output.dir
// (trainer/train/resume_policy.h).
enum class ResumeMode { kAuto, kNever, kForce };
// data.format: how data.train and data.eval are read (trainer/data/tsv.h); kAuto goes by each
// file's extension (.csv, .jsonl/.json, anything else TSV).
enum class DataFormat { kAuto, kTsv, kCsv, kJsonl };
// model.tokenizer_compat: which of Hugging Face's two BERT tokenizers the trainer's WordPiece
// reproduces, the slow (Python) BertTokenizer or the fast (Rust) one AutoTokenizer returns
// (trainer/text/wordpiece.h lists where they differ).
enum class TokenizerCompat { kSlow, kFast };

template <typename E>
struct SettingTable;

template <>
struct SettingTable<Sharding> {
  static constexpr std::pair<Sharding, std::string_view> kNames[] = {
      {Sharding::kFullShard, "full_shard"},
      {Sharding::kShardGradOp, "shard_grad_op"},
      {Sharding::kNoShard, "no_shard"},
      {Sharding::kHybridShard, "hybrid_shard"}};
};
template <>
struct SettingTable<Compression> {
  static constexpr std::pair<Compression, std::string_view> kNames[] = {
      {Compression::kAuto, "auto"}, {Compression::kNone, "none"},
      {Compression::kFp16, "fp16"}, {Compression::kBf16, "bf16"},
      {Compression::kInt8, "int8"}, {Compression::kPowerSgd, "powersgd"}};
};
template <>
struct SettingTable<Precision> {
  static constexpr std::pair<Precision, std::string_view> kNames[] = {{Precision::kAuto, "auto"},
                                                                      {Precision::kFp32, "fp32"},
                                                                      {Precision::kFp16, "fp16"},
                                                                      {Precision::kBf16, "bf16"}};
};
template <>
struct SettingTable<Backend> {
  static constexpr std::pair<Backend, std::string_view> kNames[] = {
      {Backend::kAuto, "auto"}, {Backend::kNccl, "nccl"}, {Backend::kGloo, "gloo"}};
};
template <>
struct SettingTable<LrScheduleKind> {
  static constexpr std::pair<LrScheduleKind, std::string_view> kNames[] = {
      {LrScheduleKind::kLinear, "linear"},
      {LrScheduleKind::kConstant, "constant"},
      {LrScheduleKind::kCosine, "cosine"},
      {LrScheduleKind::kPolynomial, "polynomial"}};
};
template <>
struct SettingTable<EvalStrategy> {
  static constexpr std::pair<EvalStrategy, std::string_view> kNames[] = {
      {EvalStrategy::kEpoch, "epoch"}, {EvalStrategy::kSteps, "steps"}, {EvalStrategy::kNo, "no"}};
};
template <>
struct SettingTable<Device> {
  static constexpr std::pair<Device, std::string_view> kNames[] = {
      {Device::kCpu, "cpu"}, {Device::kCuda, "cuda"}, {Device::kAuto, "auto"}};
};

template <>
struct SettingTable<ResumeMode> {
  static constexpr std::pair<ResumeMode, std::string_view> kNames[] = {
      {ResumeMode::kAuto, "auto"}, {ResumeMode::kNever, "never"}, {ResumeMode::kForce, "force"}};
};

template <>
struct SettingTable<DataFormat> {
  static constexpr std::pair<DataFormat, std::string_view> kNames[] = {
      {DataFormat::kAuto, "auto"},
      {DataFormat::kTsv, "tsv"},
      {DataFormat::kCsv, "csv"},
      {DataFormat::kJsonl, "jsonl"}};
};

template <>
struct SettingTable<TokenizerCompat> {
  static constexpr std::pair<TokenizerCompat, std::string_view> kNames[] = {
      {TokenizerCompat::kSlow, "slow"}, {TokenizerCompat::kFast, "fast"}};
};

// The name of `v` as the job spec writes it.
template <typename E>
constexpr std::string_view SettingName(E v) {
  for (const auto& [e, name] : SettingTable<E>::kNames) {
    if (e == v) return name;
  }
  return "?";  // only for a value cast from an integer outside the enum
}

// The value named `name` (exact, lower case), or nullopt.
template <typename E>
constexpr std::optional<E> ParseSetting(std::string_view name) {
  for (const auto& [e, n] : SettingTable<E>::kNames) {
    if (n == name) return e;
  }
  return std::nullopt;
}

// "a, b, c": the allowed names, in table order, for error messages.
template <typename E>
std::string AllowedSettingNames() {
  return absl::StrJoin(SettingTable<E>::kNames, ", ",
                       [](std::string* out, const auto& p) { out->append(p.second); });
}

// ParseSetting, or InvalidArgument "'<name>' is not one of: a, b, c" (the job spec's wording;
// callers prefix where the value came from).
template <typename E>
absl::StatusOr<E> ParseSettingOrError(std::string_view name) {
  if (std::optional<E> v = ParseSetting<E>(name)) return *v;
  return absl::InvalidArgumentError(
      absl::StrCat("'", std::string(name), "' is not one of: ", AllowedSettingNames<E>()));
}

}  // namespace ringmaster::jobspec
