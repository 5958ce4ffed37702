// Hang diagnosis and straggler scores from collective traces.
#include "coordinator/state/hang_diagnosis.h"

#include <algorithm>

namespace ringmaster::coordinator {

std::optional<StallDiagnosis> DiagnoseStall(const std::vector<RankTrace>& ranks, absl::Time now,
                                            absl::Duration stall_after) {
  // N: the newest collective any rank is inside.
  uint64_t n = 0;
  for (const RankTrace& t : ranks) {
    if (t.has_trace && t.in_collective) n = std::max(n, t.collective_seq);
  }
  if (n == 0) return std::nullopt;
  StallDiagnosis d;
  d.seq = n;
  d.waited = absl::ZeroDuration();
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankTrace& t = ranks[static_cast<size_t>(r)];
    if (!t.has_trace || t.collective_seq < n || t.process_stopped) {
      d.missing.push_back(r);
      if (t.has_trace && t.process_stopped) d.stopped.push_back(r);
    } else if (t.collective_seq == n && t.in_collective) {
      d.waiting.push_back(r);
      if (d.op.empty()) d.op = t.collective_op;
      // An entry without a time (a malformed report) shows no wait.
      if (t.entered_at != absl::InfinitePast()) d.waited = std::max(d.waited, now - t.entered_at);
    }
    // Past N, or done with N: it entered N, so it holds nobody up there.
  }
  if (d.missing.empty() || d.waited <= stall_after) return std::nullopt;
  return d;
}

void StragglerTracker::Reset(int world_size) {
  ranks_.assign(static_cast<size_t>(std::max(world_size, 0)), {});
}

void StragglerTracker::Observe(int rank, absl::Time at, double comm_seconds, int64_t steps) {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  std::deque<Figures>& f = ranks_[static_cast<size_t>(rank)];
  if (!f.empty()) {
    if (steps < f.back().steps || comm_seconds < f.back().comm_seconds) {
      f.clear();  // another process: its counters started over
    } else if (steps == f.back().steps) {
      return;  // no step since the last figures: they would sit mid-step
    }
  }
  f.push_back({at, comm_seconds, steps});
  // Keep the newest figures that are at least `window` old as the oldest.
  while (f.size() >= 2 && f[1].at <= at - options_.window) f.pop_front();
}

std::optional<double> StragglerTracker::CommPerStep(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return std::nullopt;
  const std::deque<Figures>& f = ranks_[static_cast<size_t>(rank)];
  if (f.size() < 2) return std::nullopt;
  const int64_t steps = f.back().steps - f.front().steps;
  if (steps < std::max<int64_t>(options_.min_steps, 1) ||
      f.back().at - f.front().at < options_.min_span) {
    return std::nullopt;
  }
  return (f.back().comm_seconds - f.front().comm_seconds) / static_cast<double>(steps);
}

std::optional<std::vector<double>> StragglerTracker::Scores() const {
  if (ranks_.empty()) return std::nullopt;
  std::vector<double> per_step;
  per_step.reserve(ranks_.size());
  for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
    std::optional<double> v = CommPerStep(r);
    if (!v) return std::nullopt;
    per_step.push_back(*v);
  }
  std::vector<double> sorted = per_step;
  // The upper median (see the header).
  const size_t mid = sorted.size() / 2;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(mid), sorted.end());
  const double median = sorted[mid];
  for (double& v : per_step) v = median - v;
  return per_step;
}

}  // namespace ringmaster::coordinator
