#include "trainer/parallel/grad_buckets.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace ringmaster::trainer {

absl::StatusOr<GradBuckets> GradBuckets::Make(const std::vector<UnitShard>& units,
                                              size_t cap_bytes) {
  // One all-reduce over a bucket needs its units side by side in the flat gradient buffer.
  for (size_t u = 1; u < units.size(); ++u) {
    if (units[u - 1].begin + units[u - 1].numel != units[u].begin) {
      return absl::InternalError(absl::StrFormat(
          "gradient buckets: unit %d ends at %d but unit %d begins at %d: the flat layout is "
          "not contiguous across units",
          u - 1, units[u - 1].begin + units[u - 1].numel, u, units[u].begin));
    }
  }
  GradBuckets b;
  b.launch.assign(units.size(), -1);
  for (int u = static_cast<int>(units.size()) - 1; u >= 0; --u) {
    const UnitShard& unit = units[static_cast<size_t>(u)];
    const bool open = !b.buckets.empty() && b.launch[static_cast<size_t>(u + 1)] < 0;
    if (!open) b.buckets.push_back(GradBucket{u, u, unit.begin + unit.numel, 0});
    GradBucket& cur = b.buckets.back();
    cur.first_unit = u;
    cur.begin = unit.begin;
    cur.numel += unit.numel;
    // Closes at the cap (always with a cap of 0), and at the first unit.
    if (u == 0 || cur.numel * sizeof(float) >= cap_bytes) {
      b.launch[static_cast<size_t>(u)] = static_cast<int>(b.buckets.size()) - 1;
    }
  }
  return b;
}

size_t BucketCapBytes(double bucket_cap_mb) {
  return static_cast<size_t>(std::llround(bucket_cap_mb * 1024.0 * 1024.0));
}

}  // namespace ringmaster::trainer
