// Gang rendezvous for a job's `distributed.nodes: MIN:MAX`: which nodes take part in the next
// generation.
//
// Nodes join one by one. MAX joined: complete at once. MIN joined: a last-call window opens
// (default 5 s) so that nodes arriving together all make it, and when it ends the rendezvous
// completes with whoever joined (at most MAX). Fewer than MIN within the join timeout (default
// 300 s, counted from the start): failed, naming who is there and how many are missing. Once MIN
// have joined the join timeout no longer applies; a node leaving before completion that drops
// the count below MIN closes the last-call window again.
//
// Time comes from the injected Clock and deadlines are evaluated on every call, so the owner
// only has to call Poll() at NextDeadline() (or on any event). Not thread-safe: one owner.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/state/clock.h"

namespace ringmaster::coordinator {

struct RendezvousOptions {
  int min_nodes = 1;
  int max_nodes = 1;
  absl::Duration last_call = absl::Seconds(5);
  absl::Duration join_timeout = absl::Seconds(300);
};

// InvalidArgument unless 1 <= min_nodes <= max_nodes, last_call >= 0 and join_timeout > 0.
absl::Status ValidateRendezvousOptions(const RendezvousOptions& options);

enum class RendezvousState {
  kWaiting,   // fewer than MIN joined
  kLastCall,  // MIN..MAX-1 joined; completes at last_call_deadline
  kComplete,  // participants fixed
  kFailed,    // join timeout with fewer than MIN
};

std::string_view RendezvousStateName(RendezvousState state);

struct RendezvousStatus {
  RendezvousState state = RendezvousState::kWaiting;
  std::vector<std::string> joined;  // joining order; the participants once complete
  int missing_for_min = 0;          // nodes still needed before it can complete
  int open_slots = 0;               // nodes that could still join (0 once complete or failed)
  absl::Time started;
  absl::Time join_deadline;
  std::optional<absl::Time> last_call_deadline;  // while kLastCall
  std::optional<absl::Time> completed;           // kComplete or kFailed: when
  absl::Status error;                            // kFailed: DeadlineExceeded saying why
};

class Rendezvous {
 public:
  // Starts now (clock.Now()). `clock` must outlive the rendezvous.
  static absl::StatusOr<Rendezvous> Start(const RendezvousOptions& options, const Clock& clock);

  // Adds `node_id`. Joining again while still open is a no-op. FailedPrecondition once complete
  // or failed (the node is not part of this generation); InvalidArgument for an empty id.
  absl::Status Join(std::string_view node_id);

  // Removes a node that joined (its agent was lost before the rendezvous completed). NotFound
  // when it had not joined; FailedPrecondition once complete or failed.
  absl::Status Leave(std::string_view node_id);

  // Applies any deadline that has passed and returns the status.
  const RendezvousStatus& Poll();

  // When Poll() next changes something on its own: the last-call or join deadline; nullopt once
  // complete or failed.
  std::optional<absl::Time> NextDeadline() const;

  const RendezvousOptions& options() const { return options_; }

 private:
  Rendezvous(const RendezvousOptions& options, const Clock& clock);

  void Advance();       // applies deadlines at clock_->Now()
  void UpdateCounts();  // missing_for_min, open_slots, state from the joined count
  void Complete(absl::Time at);
  bool Closed() const;

  RendezvousOptions options_;
  const Clock* clock_;
  RendezvousStatus status_;
  absl::flat_hash_set<std::string> members_;
};

}  // namespace ringmaster::coordinator
