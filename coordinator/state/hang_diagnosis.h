// Hang diagnosis and straggler scores from the ranks' collective traces (issue #6). Pure logic
// over plain figures; the job manager feeds it the agents' RankProgress reports.
//
// Every rank issues the same collectives in the same order, so the 1-based sequence number of
// the last collective a rank entered names the same collective on every rank. Two questions
// follow from the traces:
//
//  - Stall: N = the highest sequence number among ranks inside a collective. When ranks have
//    waited inside collective N longer than `stall_after` while other ranks have not entered it
//    (their sequence number is below N), those others hold the job up. Choices:
//      * A rank without a trace (its agent has read no status file yet, e.g. a trainer that is
//        still loading, or hung before its first collective) counts as missing: the verdict
//        needs a wait past stall_after, and a rank that has shown no trace by then has not
//        entered collective N either as far as anyone can tell. With no rank traced there is
//        no N, so the diagnosis abstains.
//      * A rank whose process is stopped (SIGSTOP, a debugger; the agent reads /proc) counts as
//        missing even inside collective N: it entered, but it cannot send its part, and the
//        others wait on it. This is what tells the culprit when every rank is inside N.
//      * Every rank inside collective N, none stopped (nobody missing) is no stall: that is a
//        slow network or a hang of all ranks alike, which the trainer's collective timeout
//        handles; naming no one would only be noise.
//      * The wait is measured from the trainer's entry timestamp against the coordinator's
//        clock: clocks of different machines must agree to well below stall_after (NTP).
//
//  - Straggler score: a slow rank makes every other rank wait for it inside the next
//    collective, and itself waits least. Per rank, the time inside collectives per optimizer
//    step over a sliding window; score = median over ranks − the rank's own. Around 0 for a
//    healthy rank, ≈ the seconds per step the job loses to a slow one. The median is the upper
//    one for an even number of ranks, so that with two ranks the slow one scores the whole
//    difference and the other 0 (not ±half).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::coordinator {

// What one rank's latest report says about its collectives.
struct RankTrace {
  bool has_trace = false;       // false: no status file read yet (the other fields are unset)
  uint64_t collective_seq = 0;  // 1-based number of the last collective entered; 0: none
  std::string collective_op;    // e.g. "AllReduceSum"
  bool in_collective = false;   // still inside collective_seq
  absl::Time entered_at = absl::InfinitePast();  // when it entered it (trainer's clock)
  bool process_stopped = false;                  // the process is stopped (SIGSTOP): cannot run
};

struct StallDiagnosis {
  uint64_t seq = 0;          // the collective the waiting ranks are inside
  std::string op;            // its name
  std::vector<int> missing;  // ranks that have not entered it (sorted)
  std::vector<int> stopped;  // those of `missing` whose process is stopped (sorted)
  std::vector<int> waiting;  // ranks inside it (sorted)
  absl::Duration waited;     // the longest wait among `waiting`
};

// `ranks[r]` is the latest trace of global rank r of the current generation (one per rank).
// A stall when some rank has waited inside collective N longer than `stall_after` and some rank
// has not entered N (see the header comment); nullopt otherwise.
std::optional<StallDiagnosis> DiagnoseStall(const std::vector<RankTrace>& ranks, absl::Time now,
                                            absl::Duration stall_after);

struct StragglerOptions {
  // Per rank, figures are kept for about this long; the rate is taken between the newest and
  // the oldest kept.
  absl::Duration window = absl::Seconds(30);
  // A rank's rate counts once its oldest and newest figures are this far apart in time and in
  // steps (shorter spans are noise: one report may catch a rank mid-step).
  absl::Duration min_span = absl::Seconds(5);
  int64_t min_steps = 2;
};

// Straggler scores of one generation's ranks. Not thread-safe: one owner.
class StragglerTracker {
 public:
  explicit StragglerTracker(StragglerOptions options = {}) : options_(options) {}

  // Forgets everything: a new generation of `world_size` ranks.
  void Reset(int world_size);
  // Rank `rank` reported, at `at` (the coordinator's clock), `comm_seconds` spent inside
  // collectives and `steps` optimizer steps since its process started. Figures are kept only
  // when the step count moved (so each sits just after a step); counts that go backwards
  // (another process) start the rank over. Ranks outside [0, world_size) are ignored.
  void Observe(int rank, absl::Time at, double comm_seconds, int64_t steps);
  // Seconds per step spent inside collectives, per rank; nullopt for a rank without a window
  // long enough yet.
  std::optional<double> CommPerStep(int rank) const;
  // Score per rank (index = rank), once every rank has a rate; nullopt before.
  std::optional<std::vector<double>> Scores() const;

 private:
  struct Figures {
    absl::Time at;
    double comm_seconds = 0;
    int64_t steps = 0;
  };

  StragglerOptions options_;
  std::vector<std::deque<Figures>> ranks_;
};

}  // namespace ringmaster::coordinator
