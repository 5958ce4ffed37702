// Sharded training checkpoints for multi-rank training: every rank holds a piece of three flat
// fp32 buffers (params, AdamW exp_avg, exp_avg_sq) and writes its own shard file; a manifest
// written last, by rank 0, makes the checkpoint complete. Loading at a different world size
// reshards: each rank reads the global ranges it now needs from whichever shards hold them.
//
//   <output_dir>/checkpoints/step-00000200/
//       shard-00000-of-00002.safetensors   1-D F32 "params", "exp_avg", "exp_avg_sq" of the
//       shard-00001-of-00002.safetensors   rank's local_numel; __metadata__ records its ranges
//       shard-0000R-of-00002.json          the rank's report to rank 0 (ranges, size, checksums)
//       save_id                            nonce of the save that wrote the directory
//       manifest.json                      meta + per rank: file, ranges, bytes, FNV-1a checksums
//
// Everything is written into checkpoints/.tmp-step-00000200/, then renamed into place by rank 0
// and the parent fsynced: a step-* directory with a manifest.json is complete.
//
// Requirement: `output_dir` must be on a filesystem that every rank sees (local disk for ranks
// on one host, or a shared filesystem such as NFS with close-to-open consistency): ranks hand
// their checksums to rank 0 through files in the temporary directory, since there is no other
// channel, and rank 0 renames a directory that holds every rank's shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer {

// Global element ranges [begin, end) a rank holds, ascending and non-overlapping (adjacent and
// empty ranges are allowed); its local arrays hold them concatenated in this order.
struct ShardRanges {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t local_numel() const;
};

struct CheckpointMeta {
  int64_t step = 0;          // optimizer steps completed
  int epoch = 0;             // epoch the next step belongs to
  int64_t cursor = 0;        // index of the next micro-batch in that epoch's plan
  int64_t samples_seen = 0;  // training samples consumed so far
  uint64_t seed = 0;         // job seed
  std::string fingerprint;   // model layout description; a mismatch is FailedPrecondition
  size_t total = 0;          // elements of each flat buffer
  int world_size = 1;        // how it was written (informational); Save records its argument
  std::string sharding;      // how it was written (informational), e.g. "per-unit"
  nlohmann::json extra = nlohmann::json::object();  // e.g. compression state, free-form
  // The run's trajectory settings, key path -> value (resume_policy.h: what a resume compares).
  // Empty in checkpoints written before they were recorded.
  std::map<std::string, std::string> settings;
  // Not recorded: a step whose checkpoint pruning must keep whatever `keep` says (the best
  // model of train.load_best_model_at_end); -1: none.
  int64_t protected_step = -1;
};

// Collective: every rank calls it with its own piece (params, exp_avg and exp_avg_sq hold
// mine.local_numel() floats each). `barrier` is a collective barrier across all ranks that
// returns an error if a peer died. Writes checkpoints/step-<meta.step>/ under `output_dir`
// (replacing a complete one of the same step), then rank 0 deletes the oldest complete
// checkpoints beyond `keep` (keep <= 0 keeps all), never the one just written nor the one of
// meta.protected_step.
//
// Protocol: rank 0 recreates checkpoints/.tmp-step-X; barrier; every rank writes and fsyncs its
// shard and its report; barrier; rank 0 checks every report (the ranges must tile [0, total)
// exactly, the shard sizes must match) and writes manifest.json, fsyncs it and the directory,
// renames it to step-X, fsyncs checkpoints/, prunes; barrier. No rank returns before the
// checkpoint is committed or known not to be. A rank that fails locally still takes part in
// every barrier (so peers do not hang) and returns its error; the others then fail too because
// rank 0 does not commit. If a barrier fails, the rank returns at once; the temporary directory
// may remain (the next save of that step removes it) and no step-X appears unless rank 0 had
// already committed (failure in the last barrier).
absl::Status SaveShardedCheckpoint(const std::string& output_dir, int rank, int world_size,
                                   const CheckpointMeta& meta, const ShardRanges& mine,
                                   const float* params, const float* exp_avg,
                                   const float* exp_avg_sq, int keep,
                                   const std::function<absl::Status()>& barrier);

// The directory a checkpoint of `step` has under `output_dir` (checkpoints/step-<8 digits>).
std::string ShardedCheckpointDir(const std::string& output_dir, int64_t step);

// Complete checkpoint directories under `output_dir` (step-* with a manifest.json; temporary
// directories ignored), oldest (lowest step) first.
std::vector<std::string> ListShardedCheckpoints(const std::string& output_dir);

// Checkpoint directories under `output_dir` named like a complete one (step-<n>) that hold no
// manifest.json, oldest first: a committed checkpoint always has one (it is written before the
// rename), so these lost it afterwards (issue #31: with every manifest deleted a run retrained
// from step 0 over them).
std::vector<std::string> ListCheckpointsWithoutManifest(const std::string& output_dir);

struct LoadedShard {
  CheckpointMeta meta;
  std::vector<float> params, exp_avg, exp_avg_sq;  // want.local_numel() each
};

// Loads the ranges `want` of one checkpoint directory. Reads the manifest, checks the
// fingerprint (FailedPrecondition on mismatch: another model) and then meta.total ==
// expected_total (DataLoss: the manifest contradicts its own fingerprint), checks
// that the manifest's ranges tile [0, total), opens only the shard files overlapping `want`,
// verifies their sizes and checksums, and copies the requested ranges. Any damage (missing,
// truncated or corrupted file, bad JSON, wrong sizes) is DataLoss naming the file; `want` not
// ascending/non-overlapping/within total is InvalidArgument.
absl::StatusOr<LoadedShard> LoadShardedCheckpoint(const std::string& dir, size_t expected_total,
                                                  const std::string& expected_fingerprint,
                                                  const ShardRanges& want);

// Just the manifest's meta (for deciding what to load); the manifest is fully validated.
absl::StatusOr<CheckpointMeta> ReadCheckpointMeta(const std::string& dir);

}  // namespace ringmaster::trainer
