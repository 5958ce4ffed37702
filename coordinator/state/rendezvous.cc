// Rendezvous: joins, last call, join timeout.
#include "coordinator/state/rendezvous.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/absl_view.h"

namespace ringmaster::coordinator {
namespace {

// At most this many node names in an error; a 4096-node job must not produce a 100 KB message.
constexpr size_t kNamesShown = 10;

std::string NodeList(const std::vector<std::string>& ids) {
  if (ids.empty()) return "none";
  if (ids.size() <= kNamesShown) return absl::StrJoin(ids, ", ");
  std::vector<std::string> head(ids.begin(), ids.begin() + kNamesShown);
  return absl::StrCat(absl::StrJoin(head, ", "), " and ", ids.size() - kNamesShown, " more");
}

}  // namespace

absl::Status ValidateRendezvousOptions(const RendezvousOptions& o) {
  if (o.min_nodes < 1 || o.max_nodes < o.min_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: nodes ", o.min_nodes, ":",
                                                   o.max_nodes, " is not 1 <= MIN <= MAX"));
  }
  if (o.last_call < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: last-call window ", absl::FormatDuration(o.last_call), " is negative"));
  }
  if (o.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: join timeout ", absl::FormatDuration(o.join_timeout), " is not positive"));
  }
  return absl::OkStatus();
}

std::string_view RendezvousStateName(RendezvousState state) {
  switch (state) {
    case RendezvousState::kWaiting:
      return "waiting";
    case RendezvousState::kLastCall:
      return "last call";
    case RendezvousState::kComplete:
      return "complete";
    case RendezvousState::kFailed:
      return "failed";
  }
  return "?";
}

absl::StatusOr<Rendezvous> Rendezvous::Start(const RendezvousOptions& options, const Clock& clock) {
  if (absl::Status st = ValidateRendezvousOptions(options); !st.ok()) return st;
  return Rendezvous(options, clock);
}

Rendezvous::Rendezvous(const RendezvousOptions& options, const Clock& clock)
    : options_(options), clock_(&clock) {
  status_.started = clock.Now();
  status_.join_deadline = status_.started + options.join_timeout;
  UpdateCounts();
}

bool Rendezvous::Closed() const {
  return status_.state == RendezvousState::kComplete || status_.state == RendezvousState::kFailed;
}

void Rendezvous::UpdateCounts() {
  const int n = static_cast<int>(status_.joined.size());
  status_.missing_for_min = std::max(0, options_.min_nodes - n);
  status_.open_slots = Closed() ? 0 : options_.max_nodes - n;
}

void Rendezvous::Complete(absl::Time at) {
  status_.state = RendezvousState::kComplete;
  status_.completed = at;
  status_.last_call_deadline.reset();
  UpdateCounts();
}

void Rendezvous::Advance() {
  if (Closed()) return;
  const absl::Time now = clock_->Now();
  if (status_.state == RendezvousState::kLastCall && now >= *status_.last_call_deadline) {
    Complete(*status_.last_call_deadline);
    return;
  }
  if (status_.state == RendezvousState::kWaiting && now >= status_.join_deadline) {
    status_.state = RendezvousState::kFailed;
    status_.completed = now;
    UpdateCounts();
    status_.error = absl::DeadlineExceededError(
        absl::StrCat("rendezvous timed out after ", absl::FormatDuration(options_.join_timeout),
                     ": ", status_.joined.size(), " of ", options_.min_nodes, "..",
                     options_.max_nodes, " nodes joined (", NodeList(status_.joined), "); ",
                     status_.missing_for_min, " more needed"));
  }
}

absl::Status Rendezvous::Join(std::string_view node_id) {
  if (node_id.empty()) return absl::InvalidArgumentError("rendezvous: empty node id");
  Advance();
  if (Closed()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rendezvous ", ToAbsl(RendezvousStateName(status_.state)), " (", status_.joined.size(),
        " nodes); node ", ToAbsl(node_id), " is too late to join"));
  }
  if (!members_.insert(std::string(node_id)).second) return absl::OkStatus();
  status_.joined.emplace_back(node_id);
  const int n = static_cast<int>(status_.joined.size());
  if (n >= options_.max_nodes) {
    Complete(clock_->Now());
    return absl::OkStatus();
  }
  if (n >= options_.min_nodes && status_.state == RendezvousState::kWaiting) {
    status_.state = RendezvousState::kLastCall;
    status_.last_call_deadline = clock_->Now() + options_.last_call;
  }
  UpdateCounts();
  Advance();  // a zero-length last call completes at once
  return absl::OkStatus();
}

absl::Status Rendezvous::Leave(std::string_view node_id) {
  Advance();
  if (Closed()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous ", ToAbsl(RendezvousStateName(status_.state)), "; node ",
                     ToAbsl(node_id), " cannot leave it"));
  }
  auto it = members_.find(ToAbsl(node_id));
  if (it == members_.end()) {
    return absl::NotFoundError(
        absl::StrCat("rendezvous: node ", ToAbsl(node_id), " has not joined"));
  }
  members_.erase(it);
  status_.joined.erase(std::find(status_.joined.begin(), status_.joined.end(), node_id));
  if (static_cast<int>(status_.joined.size()) < options_.min_nodes) {
    status_.state = RendezvousState::kWaiting;
    status_.last_call_deadline.reset();
  }
  UpdateCounts();
  Advance();  // back to waiting after the join deadline: fails now
  return absl::OkStatus();
}

const RendezvousStatus& Rendezvous::Poll() {
  Advance();
  return status_;
}

std::optional<absl::Time> Rendezvous::NextDeadline() const {
  switch (status_.state) {
    case RendezvousState::kWaiting:
      return status_.join_deadline;
    case RendezvousState::kLastCall:
      return status_.last_call_deadline;
    default:
      return std::nullopt;
  }
}

}  // namespace ringmaster::coordinator
