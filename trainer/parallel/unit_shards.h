// How FSDP-style sharding cuts the flat parameter layout among the ranks of a shard group: the
// one partition that the CPU data-parallel engine (data_parallel.h) and the CUDA one
// (trainer/cuda/parallel/cuda_data_parallel.h) share, so that their checkpoints name the same
// ranges.
//
// Units are the layout's units (embeddings, each encoder layer, the head): contiguous runs of
// specs with the same unit index. Each unit is padded to a multiple of the group size g and cut
// into g equal contiguous shards: rank r owns elements [begin + r·shard, begin + (r+1)·shard) of
// it, of which `valid` are real (the last ranks' shards may be partly or wholly padding). A
// rank's local buffers hold its shard of every unit, one after the other.
#pragma once

#include <cstddef>
#include <vector>

#include "trainer/model/bert_params.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {

struct UnitShard {
  size_t begin = 0, numel = 0;  // in the flat layout
  size_t shard = 0;             // per-rank shard size (padded numel / group size)
  size_t local = 0;             // offset of this unit's shard in the local buffers
  size_t valid = 0;             // real (unpadded) elements of this rank's shard
  size_t owned_begin = 0;       // flat offset of this rank's shard: begin + rank · shard
};

struct UnitShards {
  std::vector<UnitShard> units;
  size_t local_total = 0;  // Σ shard: the floats of each local buffer
  int group_rank = 0, group_size = 1;

  // The partition of `layout` for rank `group_rank` of a group of `group_size`.
  static UnitShards Make(const ParamLayout& layout, int group_rank, int group_size);

  // Padded elements of unit u (shard · group size): a reduce-scatter's input, a gather's output.
  size_t padded(int u) const { return units[u].shard * static_cast<size_t>(group_size); }
  // The flat ranges this rank owns (its shards' valid parts), in unit order: what it loads from
  // a checkpoint and, where it is the writer, what it saves.
  ShardRanges Owned() const;
};

// Every rank holds the whole layout (no_shard): rank k of w writes the k-th of w equal slices of
// [0, total), so the writes of a checkpoint run in parallel and tile the layout.
ShardRanges EqualSlice(size_t total, int rank, int world_size);

}  // namespace ringmaster::trainer
