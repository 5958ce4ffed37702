#include "trainer/parallel/unit_shards.h"

#include <algorithm>

namespace ringmaster::trainer {

UnitShards UnitShards::Make(const ParamLayout& layout, int group_rank, int group_size) {
  UnitShards p;
  p.group_rank = group_rank;
  p.group_size = group_size;
  for (const ParamSpec& s : layout.specs) {
    if (p.units.empty() || static_cast<int>(p.units.size()) <= s.unit) {
      p.units.push_back(UnitShard{s.offset, 0, 0, 0, 0, 0});
    }
    p.units.back().numel = s.offset + s.numel - p.units.back().begin;
  }
  const size_t g = static_cast<size_t>(group_size);
  for (UnitShard& u : p.units) {
    u.shard = (u.numel + g - 1) / g;
    u.local = p.local_total;
    const size_t lo = std::min(u.numel, static_cast<size_t>(group_rank) * u.shard);
    const size_t hi = std::min(u.numel, lo + u.shard);
    u.valid = hi - lo;
    u.owned_begin = u.begin + static_cast<size_t>(group_rank) * u.shard;
    p.local_total += u.shard;
  }
  return p;
}

ShardRanges UnitShards::Owned() const {
  ShardRanges r;
  for (const UnitShard& u : units) {
    if (u.valid > 0) r.ranges.push_back({u.owned_begin, u.owned_begin + u.valid});
  }
  return r;
}

ShardRanges EqualSlice(size_t total, int rank, int world_size) {
  ShardRanges r;
  const size_t w = static_cast<size_t>(world_size), k = static_cast<size_t>(rank);
  const size_t b = total * k / w, e = total * (k + 1) / w;
  if (b < e) r.ranges.push_back({b, e});
  return r;
}

}  // namespace ringmaster::trainer
