// Sharded checkpoints: per-rank safetensors shards, per-rank reports handed to rank 0 through
// the shared filesystem, a manifest written last, and resharding on load. See the header.
#include "trainer/train/sharded_checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/read_beneath.h"
#include "common/status_macros.h"
#include "trainer/io/safetensors.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

constexpr int kFormatVersion = 1;
constexpr char kKind[] = "ringmaster-sharded-checkpoint";
constexpr char kManifestName[] = "manifest.json";
constexpr char kSaveIdName[] = "save_id";
constexpr const char* kTensorNames[3] = {"params", "exp_avg", "exp_avg_sq"};
constexpr size_t kMaxManifestBytes = size_t{256} << 20;
constexpr size_t kMaxReportBytes = size_t{64} << 20;
constexpr int kMaxWorldSize = 99999;  // shard names carry 5 digits

std::string Join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}
std::string CheckpointRoot(const std::string& output_dir) {
  return Join(output_dir, "checkpoints");
}
// The output directory of the checkpoint directory `dir` (<output_dir>/checkpoints/step-N):
// what its files are read beneath (read_beneath.h), through the pinned handle when the trainer
// pinned it (issue #31).
std::string OutputDirOf(const std::string& dir) {
  const std::string out = fs::path(dir).parent_path().parent_path().string();
  return out.empty() ? "." : out;
}
// A checkpoint path that is a symbolic link itself (a link on the way is refused by the opens).
absl::Status LinkRefused(const std::string& path, const std::string& output_dir) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is a symbolic link; checkpoints are read below ", output_dir,
                   " without following links (remove it)"));
}
std::string StepName(int64_t step) { return absl::StrFormat("step-%08d", step); }
std::string ShardFileName(int rank, int world_size) {
  return absl::StrFormat("shard-%05d-of-%05d.safetensors", rank, world_size);
}
std::string ReportFileName(int rank, int world_size) {
  return absl::StrFormat("shard-%05d-of-%05d.json", rank, world_size);
}

uint64_t Fnv1a64(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

bool ParseHex64(const std::string& s, uint64_t* out) {
  if (s.size() != 16) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

// A message naming `path`: `msg` itself when it already does, else "<path>: <msg>".
std::string NamingPath(const std::string& path, const absl::Status& s) {
  const std::string msg(s.message());
  return msg.find(path) != std::string::npos ? msg : absl::StrCat(path, ": ", msg);
}

// Empty when `ranges` are ascending, non-overlapping and within [0, total); else the problem.
std::string RangesProblem(const Ranges& ranges, size_t total) {
  size_t prev_end = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [b, e] = ranges[i];
    if (b > e) return absl::StrCat("range ", i, " [", b, ", ", e, ") has begin > end");
    if (e > total) return absl::StrCat("range ", i, " [", b, ", ", e, ") exceeds total ", total);
    if (b < prev_end) {
      return absl::StrCat("range ", i, " [", b, ", ", e,
                          ") overlaps or precedes the previous range ending at ", prev_end);
    }
    prev_end = e;
  }
  return "";
}

// Empty when the ranges of all owners together tile [0, total) exactly; else the problem.
std::string TilingProblem(const std::vector<const Ranges*>& owners, size_t total) {
  struct Piece {
    size_t begin, end;
    size_t owner;
  };
  std::vector<Piece> pieces;
  for (size_t o = 0; o < owners.size(); ++o) {
    for (const auto& [b, e] : *owners[o]) {
      if (b < e) pieces.push_back({b, e, o});
    }
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  size_t next = 0;
  size_t prev_owner = 0;
  for (const Piece& p : pieces) {
    if (p.begin > next) {
      return absl::StrCat("elements [", next, ", ", p.begin, ") are held by no rank");
    }
    if (p.begin < next) {
      return absl::StrCat("elements [", p.begin, ", ", std::min(next, p.end),
                          ") are held by both rank ", prev_owner, " and rank ", p.owner);
    }
    next = p.end;
    prev_owner = p.owner;
  }
  if (next != total) {
    return absl::StrCat("elements [", next, ", ", total, ") are held by no rank");
  }
  return "";
}

nlohmann::json RangesToJson(const Ranges& ranges) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [b, e] : ranges) j.push_back({b, e});
  return j;
}

// Parses [[b, e], ...] of unsigned integers; false on any other shape.
bool RangesFromJson(const nlohmann::json& j, Ranges* out) {
  if (!j.is_array()) return false;
  out->clear();
  for (const nlohmann::json& r : j) {
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_unsigned() ||
        !r[1].is_number_unsigned()) {
      return false;
    }
    out->emplace_back(r[0].get<size_t>(), r[1].get<size_t>());
  }
  return true;
}

size_t NumelOf(const Ranges& ranges) {
  size_t n = 0;
  for (const auto& [b, e] : ranges) n += e - b;
  return n;
}

// One rank's shard as described in its report and in the manifest.
struct ShardEntry {
  int rank = 0;
  std::string file;
  Ranges ranges;
  uint64_t bytes = 0;
  uint64_t fnv1a64[3] = {0, 0, 0};  // per kTensorNames
};

nlohmann::json ShardEntryToJson(const ShardEntry& s) {
  nlohmann::json sums = nlohmann::json::object();
  for (int t = 0; t < 3; ++t) sums[kTensorNames[t]] = Hex64(s.fnv1a64[t]);
  return {{"rank", s.rank},
          {"file", s.file},
          {"ranges", RangesToJson(s.ranges)},
          {"bytes", s.bytes},
          {"fnv1a64", std::move(sums)}};
}

// Parses one shard entry; errors are DataLoss naming `path` (the file the entry came from).
absl::Status ShardEntryFromJson(const nlohmann::json& j, size_t total, const std::string& path,
                                ShardEntry* out) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": shard entry ", what));
  };
  if (!j.is_object()) return bad("is not an object");
  try {
    out->rank = j.at("rank").get<int>();
    out->file = j.at("file").get<std::string>();
    if (!RangesFromJson(j.at("ranges"), &out->ranges)) {
      return bad(absl::StrCat("of rank ", out->rank, ": 'ranges' is not [[begin, end], ...]"));
    }
    const nlohmann::json& bytes = j.at("bytes");
    if (!bytes.is_number_unsigned()) return bad("'bytes' is not an unsigned integer");
    out->bytes = bytes.get<uint64_t>();
    const nlohmann::json& sums = j.at("fnv1a64");
    for (int t = 0; t < 3; ++t) {
      if (!ParseHex64(sums.at(kTensorNames[t]).get<std::string>(), &out->fnv1a64[t])) {
        return bad(absl::StrCat("of rank ", out->rank, ": checksum of '", kTensorNames[t],
                                "' is not 16 hex digits"));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  // The file is opened relative to the checkpoint directory: refuse anything but a plain name.
  if (out->file.empty() || out->file[0] == '.' || out->file.find('/') != std::string::npos) {
    return bad(absl::StrCat("of rank ", out->rank, ": bad file name '", out->file, "'"));
  }
  const std::string problem = RangesProblem(out->ranges, total);
  if (!problem.empty()) return bad(absl::StrCat("of rank ", out->rank, ": ", problem));
  return absl::OkStatus();
}

struct Manifest {
  CheckpointMeta meta;
  std::string save_id;
  std::vector<ShardEntry> shards;  // shards[r].rank == r
};

nlohmann::json ManifestToJson(const Manifest& m) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardEntry& s : m.shards) shards.push_back(ShardEntryToJson(s));
  return {{"format_version", kFormatVersion},
          {"kind", kKind},
          {"save_id", m.save_id},
          {"step", m.meta.step},
          {"epoch", m.meta.epoch},
          {"cursor", m.meta.cursor},
          {"samples_seen", m.meta.samples_seen},
          {"seed", m.meta.seed},
          {"fingerprint", m.meta.fingerprint},
          {"total", m.meta.total},
          {"world_size", m.meta.world_size},
          {"sharding", m.meta.sharding},
          {"extra", m.meta.extra},
          {"settings", m.meta.settings},
          {"shards", std::move(shards)}};
}

// Reads and fully validates <dir>/manifest.json; any damage is DataLoss naming the file.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  const std::string output_dir = OutputDirOf(dir);
  absl::StatusOr<struct stat> st = StatBeneath(output_dir, dir);
  if (st.ok() && S_ISLNK(st->st_mode)) return LinkRefused(dir, output_dir);
  if (!st.ok() && !absl::IsNotFound(st.status())) return st.status();  // a link on the way
  if (!st.ok() || !S_ISDIR(st->st_mode)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no such checkpoint directory"));
  }
  const std::string path = Join(dir, kManifestName);
  absl::StatusOr<std::string> text = ReadFileBeneath(output_dir, path, kMaxManifestBytes);
  if (!text.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest unreadable: ", NamingPath(path, text.status())));
  }
  const nlohmann::json j = ParseJsonLimited(*text, path).value_or(nlohmann::json());
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid JSON manifest"));
  }
  Manifest m;
  CheckpointMeta& meta = m.meta;
  try {
    if (j.at("kind").get<std::string>() != kKind) {
      return absl::DataLossError(absl::StrCat(path, ": not a sharded checkpoint manifest"));
    }
    if (j.at("format_version").get<int>() != kFormatVersion) {
      return absl::DataLossError(
          absl::StrCat(path, ": unknown format_version ", JsonExcerpt(j.at("format_version"))));
    }
    m.save_id = j.at("save_id").get<std::string>();
    meta.step = j.at("step").get<int64_t>();
    meta.epoch = j.at("epoch").get<int>();
    meta.cursor = j.at("cursor").get<int64_t>();
    meta.samples_seen = j.at("samples_seen").get<int64_t>();
    if (!j.at("seed").is_number_unsigned() || !j.at("total").is_number_unsigned()) {
      return absl::DataLossError(absl::StrCat(path, ": 'seed' or 'total' is not unsigned"));
    }
    meta.seed = j.at("seed").get<uint64_t>();
    meta.total = j.at("total").get<size_t>();
    meta.fingerprint = j.at("fingerprint").get<std::string>();
    meta.world_size = j.at("world_size").get<int>();
    meta.sharding = j.at("sharding").get<std::string>();
    meta.extra = j.at("extra");
    // Absent from manifests written before settings were recorded.
    if (j.contains("settings")) {
      const nlohmann::json& settings = j.at("settings");
      if (!settings.is_object()) {
        return absl::DataLossError(absl::StrCat(path, ": 'settings' is not an object"));
      }
      for (const auto& [key, value] : settings.items()) {
        meta.settings[key] = value.get<std::string>();
      }
    }
    const nlohmann::json& shards = j.at("shards");
    if (meta.world_size < 1 || meta.world_size > kMaxWorldSize || !shards.is_array() ||
        shards.size() != static_cast<size_t>(meta.world_size)) {
      return absl::DataLossError(
          absl::StrCat(path, ": world_size ", meta.world_size, " does not match the shard list"));
    }
    m.shards.resize(shards.size());
    for (size_t r = 0; r < shards.size(); ++r) {
      RM_RETURN_IF_ERROR(ShardEntryFromJson(shards[r], meta.total, path, &m.shards[r]));
      if (m.shards[r].rank != static_cast<int>(r)) {
        return absl::DataLossError(
            absl::StrCat(path, ": shard entry ", r, " is of rank ", m.shards[r].rank));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  std::vector<const Ranges*> owners;
  for (const ShardEntry& s : m.shards) owners.push_back(&s.ranges);
  const std::string problem = TilingProblem(owners, meta.total);
  if (!problem.empty()) {
    return absl::DataLossError(
        absl::StrCat(path, ": shard ranges do not tile [0, ", meta.total, "): ", problem));
  }
  return m;
}

std::string NewSaveId() {
  std::random_device rd;
  const uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  const uint64_t t = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch() /
                                           std::chrono::nanoseconds(1));
  return absl::StrCat(Hex64(r ^ (t * 0x9e3779b97f4a7c15ULL)), "-", ::getpid());
}

absl::Status ValidateSaveArgs(int rank, int world_size, const CheckpointMeta& meta,
                              const ShardRanges& mine, const float* params, const float* exp_avg,
                              const float* exp_avg_sq) {
  if (world_size < 1 || world_size > kMaxWorldSize || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad rank ", rank, " / world_size ", world_size));
  }
  if (meta.step < 0) return absl::InvalidArgumentError("negative step");
  const std::string problem = RangesProblem(mine.ranges, meta.total);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("this rank's ranges: ", problem));
  }
  if (mine.local_numel() > 0 &&
      (params == nullptr || exp_avg == nullptr || exp_avg_sq == nullptr)) {
    return absl::InvalidArgumentError("null buffer for a non-empty shard");
  }
  return absl::OkStatus();
}

// Rank 0, phase 1: a fresh temporary directory holding the save id. Everything below
// output_dir is created without following links (issue #20): a checkpoints/ planted as a link to
// somewhere else is refused, not written through.
absl::Status PrepareTmp(const std::string& output_dir, const std::string& root,
                        const std::string& tmp, const std::string& save_id) {
  RM_RETURN_IF_ERROR(MakeDirsBeneath(output_dir, root));
  if (absl::Status s = RemoveAllBeneath(output_dir, tmp); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot remove stale directory: ", s.message()));
  }
  RM_RETURN_IF_ERROR(MakeDirsBeneath(output_dir, tmp));
  return WriteFileAtomicBeneath(output_dir, Join(tmp, kSaveIdName), save_id);
}

// Every rank, phase 2: the shard file and the report rank 0 builds the manifest from.
absl::Status WriteShard(const std::string& output_dir, const std::string& tmp, int rank,
                        int world_size, const CheckpointMeta& meta, const ShardRanges& mine,
                        const float* const bufs[3], const std::string& save_id) {
  ShardEntry entry;
  entry.rank = rank;
  entry.file = ShardFileName(rank, world_size);
  entry.ranges = mine.ranges;
  const size_t n = mine.local_numel();
  const std::string path = Join(tmp, entry.file);
  std::vector<TensorToWrite> tensors;
  for (int t = 0; t < 3; ++t) {
    tensors.push_back(
        {kTensorNames[t], DType::kF32, {static_cast<int64_t>(n)}, bufs[t], n * sizeof(float)});
    entry.fnv1a64[t] = Fnv1a64(bufs[t], n * sizeof(float));
  }
  const std::map<std::string, std::string> metadata = {
      {"format", kKind},
      {"rank", absl::StrCat(rank)},
      {"world_size", absl::StrCat(world_size)},
      {"step", absl::StrCat(meta.step)},
      {"total", absl::StrCat(meta.total)},
      {"ranges", RangesToJson(mine.ranges).dump()}};
  // The directory is reached without links (the file itself is opened O_NOFOLLOW).
  RM_RETURN_IF_ERROR(MakeDirsBeneath(output_dir, tmp));
  // Fsyncs file and directory; reached through output_dir's handle (issue #31).
  RM_RETURN_IF_ERROR(WriteSafetensors(path, tensors, metadata, output_dir));
  RM_ASSIGN_OR_RETURN(const struct stat written, StatBeneath(output_dir, path));
  entry.bytes = static_cast<uint64_t>(written.st_size);
  nlohmann::json report = ShardEntryToJson(entry);
  report["save_id"] = save_id;
  report["world_size"] = world_size;
  return WriteFileAtomicBeneath(output_dir, Join(tmp, ReportFileName(rank, world_size)),
                                report.dump(2) + "\n");
}

// Rank 0's report reader: the entry of `rank`, checked against this save.
// Read below output_dir without following links, like the writes (issue #31).
absl::StatusOr<ShardEntry> ReadReport(const std::string& output_dir, const std::string& tmp,
                                      int rank, int world_size, size_t total,
                                      const std::string& save_id) {
  const std::string path = Join(tmp, ReportFileName(rank, world_size));
  absl::StatusOr<std::string> text = ReadFileBeneath(output_dir, path, kMaxReportBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("rank ", rank, " did not report its shard: ",
                                     NamingPath(path, text.status())));
  }
  const nlohmann::json j = ParseJsonLimited(*text, path).value_or(nlohmann::json());
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid JSON report"));
  }
  ShardEntry entry;
  RM_RETURN_IF_ERROR(ShardEntryFromJson(j, total, path, &entry));
  bool ours = false;
  try {
    ours = j.at("save_id").get<std::string>() == save_id &&
           j.at("world_size").get<int>() == world_size;
  } catch (const nlohmann::json::exception&) {
  }
  if (!ours || entry.rank != rank || entry.file != ShardFileName(rank, world_size)) {
    return absl::InternalError(absl::StrCat(path, ": report is not of rank ", rank, " of ",
                                            world_size, " in this save (stale or foreign)"));
  }
  const std::string shard = Join(tmp, entry.file);
  absl::StatusOr<struct stat> st = StatBeneath(output_dir, shard);
  if (!st.ok()) return absl::DataLossError(NamingPath(shard, st.status()));
  if (S_ISLNK(st->st_mode)) return LinkRefused(shard, output_dir);
  const uint64_t size = static_cast<uint64_t>(st->st_size);
  if (size != entry.bytes) {
    return absl::DataLossError(
        absl::StrCat(shard, ": file is ", size, " bytes, rank ", rank, " reported ", entry.bytes));
  }
  return entry;
}

// Deletes the oldest complete checkpoints beyond `keep`, never `just_written` nor `kept`.
void Prune(const std::string& output_dir, const std::string& just_written, int keep,
           const std::string& kept) {
  if (keep <= 0) return;
  std::vector<std::string> all = ListShardedCheckpoints(output_dir);
  size_t count = all.size();
  for (const std::string& d : all) {
    if (count <= static_cast<size_t>(keep)) break;
    if (fs::path(d) == fs::path(just_written) || (!kept.empty() && fs::path(d) == fs::path(kept))) {
      continue;
    }
    if (absl::Status s = RemoveAllBeneath(output_dir, d); !s.ok()) {
      LogWarning(absl::StrCat("cannot delete old checkpoint ", d, ": ", s.message()));
    } else {
      --count;
    }
  }
}

// Rank 0, phase 3: verifies every rank's report, writes the manifest and renames into place.
absl::Status Commit(const std::string& output_dir, const std::string& root, const std::string& tmp,
                    const std::string& final_dir, int world_size, const CheckpointMeta& meta,
                    const std::string& save_id, int keep) {
  Manifest m;
  m.meta = meta;
  m.meta.world_size = world_size;
  m.save_id = save_id;
  for (int r = 0; r < world_size; ++r) {
    RM_ASSIGN_OR_RETURN(ShardEntry e,
                        ReadReport(output_dir, tmp, r, world_size, meta.total, save_id));
    m.shards.push_back(std::move(e));
  }
  std::vector<const Ranges*> owners;
  for (const ShardEntry& s : m.shards) owners.push_back(&s.ranges);
  const std::string problem = TilingProblem(owners, meta.total);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the ranges of the ", world_size,
                                                   " ranks do not tile [0, ", meta.total,
                                                   ") exactly: ", problem));
  }
  nlohmann::json j;
  try {
    j = ManifestToJson(m);
    // WriteFileAtomic fsyncs the manifest and the temporary directory.
    RM_RETURN_IF_ERROR(
        WriteFileAtomicBeneath(output_dir, Join(tmp, kManifestName), j.dump(2) + "\n"));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot encode the manifest: ", e.what()));
  }
  std::error_code ec;
  const std::string aside = absl::StrCat(final_dir, ".old-", save_id);
  bool moved_aside = false;
  if (fs::exists(final_dir, ec)) {
    // Same step saved again (e.g. a resumed run's final save): replace it. Renames go through
    // output_dir's handle, so a checkpoints/ swapped for a link is refused (issue #31).
    if (absl::Status s = RenameBeneath(output_dir, final_dir, aside); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("cannot move ", final_dir, " aside: ", s.message()));
    }
    moved_aside = true;
  }
  if (absl::Status s = RenameBeneath(output_dir, tmp, final_dir); !s.ok()) {
    if (moved_aside) RenameBeneath(output_dir, aside, final_dir).IgnoreError();
    return s;
  }
  RM_RETURN_IF_ERROR(FsyncDirBeneath(output_dir, root));
  if (moved_aside) RemoveAllBeneath(output_dir, aside).IgnoreError();
  Prune(output_dir, final_dir, keep,
        meta.protected_step >= 0 ? Join(root, StepName(meta.protected_step)) : std::string());
  return absl::OkStatus();
}

}  // namespace

size_t ShardRanges::local_numel() const { return NumelOf(ranges); }

absl::Status SaveShardedCheckpoint(const std::string& output_dir, int rank, int world_size,
                                   const CheckpointMeta& meta, const ShardRanges& mine,
                                   const float* params, const float* exp_avg,
                                   const float* exp_avg_sq, int keep,
                                   const std::function<absl::Status()>& barrier) {
  const std::string root = CheckpointRoot(output_dir);
  const std::string name = StepName(meta.step);
  const std::string tmp = Join(root, ".tmp-" + name);
  const std::string final_dir = Join(root, name);
  auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, ": checkpoint ", final_dir,
                                               " not written: ", s.message()));
  };
  if (!barrier && world_size != 1) {
    return failed(absl::InvalidArgumentError("no barrier given for a multi-rank save"));
  }
  auto sync = [&](int which) -> absl::Status {
    absl::Status s = barrier ? barrier() : absl::OkStatus();
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat("barrier ", which, " of 3 failed: ", s.message()));
  };

  // A local failure does not skip the barriers: peers would hang. Rank 0 commits only when
  // every rank has reported, so a failed rank makes the whole save fail.
  absl::Status local = ValidateSaveArgs(rank, world_size, meta, mine, params, exp_avg, exp_avg_sq);
  std::string save_id;
  if (rank == 0 && local.ok()) {
    save_id = NewSaveId();
    local = PrepareTmp(output_dir, root, tmp, save_id);
  }
  if (absl::Status s = sync(1); !s.ok()) return failed(s);

  if (local.ok() && rank != 0) {
    absl::StatusOr<std::string> id = ReadFileBeneath(output_dir, Join(tmp, kSaveIdName), 4096);
    if (id.ok()) {
      save_id = *std::move(id);
    } else {
      local = absl::Status(id.status().code(), absl::StrCat("rank 0 did not prepare ", tmp, ": ",
                                                            id.status().message()));
    }
  }
  if (local.ok()) {
    const float* const bufs[3] = {params, exp_avg, exp_avg_sq};
    local = WriteShard(output_dir, tmp, rank, world_size, meta, mine, bufs, save_id);
  }
  if (absl::Status s = sync(2); !s.ok()) return failed(s);

  if (rank == 0) {
    if (local.ok()) {
      local = Commit(output_dir, root, tmp, final_dir, world_size, meta, save_id, keep);
    }
    if (!local.ok()) {
      // Every rank is past its writes: the partial directory can go.
      RemoveAllBeneath(output_dir, tmp).IgnoreError();
    }
  }
  if (absl::Status s = sync(3); !s.ok()) {
    if (rank == 0 && local.ok()) {
      return absl::Status(s.code(), absl::StrCat("rank 0: checkpoint ", final_dir,
                                                 " committed, but ", s.message()));
    }
    return failed(s);
  }
  if (!local.ok()) return failed(local);
  if (rank != 0) {
    // Committed by rank 0 in this save (not an older directory of the same step)?
    absl::StatusOr<Manifest> m = ReadManifest(final_dir);
    if (!m.ok() || m->save_id != save_id) {
      return failed(
          absl::AbortedError(absl::StrCat("rank 0 did not commit it (see rank 0's error)",
                                          m.ok() ? "" : absl::StrCat(": ", m.status().message()))));
    }
  }
  return absl::OkStatus();
}

std::string ShardedCheckpointDir(const std::string& output_dir, int64_t step) {
  return Join(CheckpointRoot(output_dir), StepName(step));
}

namespace {

// step-<n> directories under output_dir/checkpoints whose manifest.json is (`with_manifest`) or
// is not there, oldest first.
std::vector<std::string> ListStepDirs(const std::string& output_dir, bool with_manifest) {
  std::vector<std::pair<int64_t, std::string>> found;
  const std::string root = CheckpointRoot(output_dir);
  // Listed below output_dir following no link (issue #31). A step-<n> that is a link is listed
  // as a checkpoint, so that reading it is refused naming it, instead of being passed over.
  absl::StatusOr<std::vector<DirEntryBeneath>> entries = ListDirBeneath(output_dir, root);
  if (!entries.ok()) {
    if (!absl::IsNotFound(entries.status())) {
      LogWarning(absl::StrCat("cannot list checkpoints: ", entries.status().message()));
    }
    return {};
  }
  for (const DirEntryBeneath& e : *entries) {
    const std::string& n = e.name;
    if (n.rfind("step-", 0) != 0 || n.size() == 5) continue;
    int64_t step = 0;
    const char* first = n.data() + 5;
    const char* last = n.data() + n.size();
    const auto [p, err] = std::from_chars(first, last, step);
    if (err != std::errc() || p != last || *first == '-' || *first == '+') continue;
    const std::string path = Join(root, n);
    bool has_manifest = S_ISLNK(e.type);
    if (S_ISDIR(e.type)) {
      absl::StatusOr<struct stat> m = StatBeneath(output_dir, Join(path, kManifestName));
      has_manifest = m.ok() && (S_ISREG(m->st_mode) || S_ISLNK(m->st_mode));
    } else if (!S_ISLNK(e.type)) {
      continue;
    }
    if (has_manifest != with_manifest) continue;
    found.emplace_back(step, path);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

}  // namespace

std::vector<std::string> ListShardedCheckpoints(const std::string& output_dir) {
  return ListStepDirs(output_dir, true);
}

std::vector<std::string> ListCheckpointsWithoutManifest(const std::string& output_dir) {
  return ListStepDirs(output_dir, false);
}

absl::StatusOr<CheckpointMeta> ReadCheckpointMeta(const std::string& dir) {
  RM_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  return std::move(m.meta);
}

absl::StatusOr<LoadedShard> LoadShardedCheckpoint(const std::string& dir, size_t expected_total,
                                                  const std::string& expected_fingerprint,
                                                  const ShardRanges& want) {
  RM_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  if (m.meta.fingerprint != expected_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": checkpoint is of another model (",
                                                      m.meta.fingerprint, ") than this job's (",
                                                      expected_fingerprint, ")"));
  }
  if (m.meta.total != expected_total) {
    // The fingerprint (this model's layout) fixes the element count: a manifest that names this
    // model with another total contradicts itself. It is damage, which a resume skips for the
    // previous checkpoint, not a sign that the job changed (issue #20: total 2^62 stopped the
    // trainer with exit 1).
    return absl::DataLossError(absl::StrCat(Join(dir, kManifestName), ": total ", m.meta.total,
                                            " contradicts the fingerprint of this model (",
                                            expected_total, " elements per buffer)"));
  }
  const std::string problem = RangesProblem(want.ranges, expected_total);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("requested ranges: ", problem));
  }
  const size_t n = want.local_numel();
  LoadedShard out;
  out.meta = m.meta;
  float* dst[3];
  std::vector<float>* vecs[3] = {&out.params, &out.exp_avg, &out.exp_avg_sq};
  for (int t = 0; t < 3; ++t) {
    vecs[t]->assign(n, 0.0f);
    dst[t] = vecs[t]->data();
  }
  // Local offset of each wanted range.
  std::vector<size_t> want_off(want.ranges.size());
  for (size_t i = 0, off = 0; i < want.ranges.size(); ++i) {
    want_off[i] = off;
    off += want.ranges[i].second - want.ranges[i].first;
  }

  struct Copy {
    size_t src, dst, len;  // elements
  };
  size_t copied = 0;
  for (const ShardEntry& s : m.shards) {
    std::vector<Copy> copies;
    size_t src_off = 0;
    for (const auto& [sb, se] : s.ranges) {
      // First wanted range ending after sb (ends are non-decreasing).
      auto it = std::upper_bound(want.ranges.begin(), want.ranges.end(), sb,
                                 [](size_t v, const auto& r) { return v < r.second; });
      for (; it != want.ranges.end() && it->first < se; ++it) {
        const size_t lo = std::max(sb, it->first), hi = std::min(se, it->second);
        if (lo >= hi) continue;
        const size_t wi = static_cast<size_t>(it - want.ranges.begin());
        copies.push_back({src_off + (lo - sb), want_off[wi] + (lo - it->first), hi - lo});
      }
      src_off += se - sb;
    }
    if (copies.empty()) continue;  // this shard holds nothing we need: not even opened

    const std::string path = Join(dir, s.file);
    // Below the output directory, following no link (issue #31).
    absl::StatusOr<int> fd = OpenRegularFileBeneath(OutputDirOf(dir), path);
    if (!fd.ok()) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint shard ", path, " is missing or unreadable: ", fd.status().message()));
    }
    struct stat st {};
    const uint64_t size = ::fstat(*fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    if (size != s.bytes) {
      ::close(*fd);
      return absl::DataLossError(absl::StrCat("checkpoint shard ", path, " is ", size,
                                              " bytes, the manifest says ", s.bytes,
                                              " (truncated or replaced)"));
    }
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
        SafetensorsReader::OpenFd(*fd, path);
    if (!reader.ok()) return absl::DataLossError(NamingPath(path, reader.status()));
    const std::map<std::string, std::string>& md = (*reader)->metadata();
    if (auto r = md.find("ranges"); r != md.end()) {
      const nlohmann::json rj = ParseJsonLimited(r->second, path).value_or(nlohmann::json());
      Ranges recorded;
      if (!RangesFromJson(rj, &recorded) || recorded != s.ranges) {
        return absl::DataLossError(
            absl::StrCat(path, ": ranges in the shard's metadata differ from the manifest's"));
      }
    }
    const size_t local = NumelOf(s.ranges);
    const uint8_t* src[3];
    for (int t = 0; t < 3; ++t) {
      const TensorInfo* info = (*reader)->Find(kTensorNames[t]);
      if (info == nullptr) {
        return absl::DataLossError(absl::StrCat(path, ": no tensor '", kTensorNames[t], "'"));
      }
      if (info->dtype != DType::kF32 || info->shape.size() != 1 || info->numel() != local) {
        return absl::DataLossError(absl::StrCat(path, ": tensor '", kTensorNames[t],
                                                "' is not F32 of ", local, " elements"));
      }
      src[t] = (*reader)->data(*info);
      const uint64_t sum = Fnv1a64(src[t], info->end - info->begin);
      if (sum != s.fnv1a64[t]) {
        return absl::DataLossError(absl::StrCat(
            path, ": tensor '", kTensorNames[t], "' fails its checksum (fnv1a64 ", Hex64(sum),
            ", manifest says ", Hex64(s.fnv1a64[t]), "): the file is corrupted"));
      }
    }
    for (const Copy& c : copies) {
      for (int t = 0; t < 3; ++t) {
        std::memcpy(dst[t] + c.dst, src[t] + c.src * sizeof(float), c.len * sizeof(float));
      }
      copied += c.len;
    }
  }
  if (copied != n) {
    return absl::InternalError(absl::StrCat(dir, ": copied ", copied, " of ", n,
                                            " requested elements (ranges not covered)"));
  }
  return out;
}

}  // namespace ringmaster::trainer
