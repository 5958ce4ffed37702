// CallLimits and FirstMessageDeadlines: per-peer rate and stream limits.
#include "coordinator/service/call_limits.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "security/refusals.h"

namespace ringmaster::coordinator {

template <typename Map>
std::string CallLimits::KeyFor(const Map& table, std::string_view peer) const {
  std::string host = security::PeerHost(peer);
  if (table.size() >= options_.max_peers && !table.contains(host)) return "";
  return host;
}

bool CallLimits::AllowRegister(std::string_view peer, absl::Time now) {
  if (options_.register_per_second <= 0) return true;
  absl::MutexLock lock(&mu_);
  if (buckets_.size() >= options_.max_peers) {
    // Forget hosts whose bucket has refilled: they are where a new bucket would start anyway.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      const double t = it->second.tokens + absl::ToDoubleSeconds(now - it->second.refilled) *
                                               options_.register_per_second;
      if (t >= options_.register_burst) {
        buckets_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  const std::string key = KeyFor(buckets_, peer);
  auto [it, inserted] = buckets_.try_emplace(key, Bucket{options_.register_burst, now});
  Bucket& b = it->second;
  if (!inserted) {
    b.tokens = std::min(options_.register_burst,
                        b.tokens + std::max(0.0, absl::ToDoubleSeconds(now - b.refilled)) *
                                       options_.register_per_second);
    b.refilled = std::max(b.refilled, now);
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

std::optional<CallLimits::Slot> CallLimits::AcquireStream(StreamKind kind, std::string_view peer) {
  absl::MutexLock lock(&mu_);
  auto& table = streams_[static_cast<int>(kind)];
  std::string key = KeyFor(table, peer);
  int& open = table[key];
  if (options_.streams_per_peer > 0 && open >= options_.streams_per_peer) {
    if (open == 0) table.erase(key);
    return std::nullopt;
  }
  ++open;
  return Slot(this, kind, std::move(key));
}

void CallLimits::Slot::Release() {
  if (limits_ == nullptr) return;
  CallLimits* limits = std::exchange(limits_, nullptr);
  absl::MutexLock lock(&limits->mu_);
  auto& table = limits->streams_[static_cast<int>(kind_)];
  auto it = table.find(key_);
  if (it != table.end() && --it->second <= 0) table.erase(it);
}

FirstMessageDeadlines::FirstMessageDeadlines() : thread_([this] { Run(); }) {}

FirstMessageDeadlines::~FirstMessageDeadlines() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

uint64_t FirstMessageDeadlines::Arm(grpc::ServerContext* context, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  armed_[id] = {deadline, context};
  return id;
}

void FirstMessageDeadlines::Disarm(uint64_t id) {
  absl::MutexLock lock(&mu_);
  armed_.erase(id);
}

void FirstMessageDeadlines::Run() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = absl::Now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.first <= now) {
        it->second.second->TryCancel();  // its Read returns false and the handler ends
        it = armed_.erase(it);
      } else {
        next = std::min(next, it->second.first);
        ++it;
      }
    }
    // Woken by Arm (the first deadline may be new) or the destructor.
    auto changed = [this, seen = next_id_]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || next_id_ != seen; };
    mu_.AwaitWithDeadline(absl::Condition(&changed), next);
  }
}

}  // namespace ringmaster::coordinator
