// Per-peer limits on the coordinator's calls (issue #31, docs/operations.md "Security"): what a
// holder of a token can make the coordinator hold open or do per second.
//  - Register: a token bucket per peer host (the caller's address without its port, so that new
//    connections do not get new buckets): `register_per_second` refill, `register_burst` deep.
//    A call with no token left is refused with RESOURCE_EXHAUSTED.
//  - Streams: at most `streams_per_peer` open WatchJob streams per peer host, and as many
//    Heartbeat streams that have not yet sent their first message; the next is refused with
//    RESOURCE_EXHAUSTED. Each such stream holds a server thread, so this bounds the threads an
//    idle client can take.
//  - A Heartbeat stream that sends no first message within `first_message_deadline` is
//    cancelled (FirstMessageDeadlines), so an idle one frees its slot and thread.
// Peers are told apart up to `max_peers` hosts; beyond that, new hosts share one bucket and one
// stream count, so the tables themselves stay bounded. Thread-safe.
#pragma once

#include <grpcpp/server_context.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringmaster::coordinator {

struct CallLimitOptions {
  double register_per_second = 5;  // --register-rate; 0: no limit
  double register_burst = 50;
  int streams_per_peer = 64;  // --max-streams-per-peer; 0: no limit
  absl::Duration first_message_deadline = absl::Seconds(10);
  size_t max_peers = 4096;
};

enum class StreamKind { kWatchJob, kHeartbeatFirstMessage };

class CallLimits {
 public:
  explicit CallLimits(const CallLimitOptions& options) : options_(options) {}

  const CallLimitOptions& options() const { return options_; }

  // True when `peer` (gRPC's ServerContext::peer()) may register now (and takes a token).
  bool AllowRegister(std::string_view peer, absl::Time now = absl::Now());

  // An open stream's slot; releases it when destroyed.
  class Slot {
   public:
    Slot(CallLimits* limits, StreamKind kind, std::string key)
        : limits_(limits), kind_(kind), key_(std::move(key)) {}
    Slot(Slot&& other) noexcept
        : limits_(std::exchange(other.limits_, nullptr)),
          kind_(other.kind_),
          key_(std::move(other.key_)) {}
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        Release();
        limits_ = std::exchange(other.limits_, nullptr);
        kind_ = other.kind_;
        key_ = std::move(other.key_);
      }
      return *this;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }
    void Release();

   private:
    CallLimits* limits_;
    StreamKind kind_;
    std::string key_;
  };
  // A slot for one more stream of `kind` from `peer`; nullopt when the peer has its limit open.
  std::optional<Slot> AcquireStream(StreamKind kind, std::string_view peer);

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };
  // The table key for `peer`'s host: the host itself, or "" (shared) once max_peers are known.
  template <typename Map>
  std::string KeyFor(const Map& table, std::string_view peer) const;

  const CallLimitOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> streams_[2] ABSL_GUARDED_BY(mu_);
};

// Cancels the calls of streams that did not get their first message in time: Arm when the
// stream opens, Disarm once the first message arrived (or the handler returns). One thread for
// every stream. Thread-safe.
class FirstMessageDeadlines {
 public:
  FirstMessageDeadlines();
  ~FirstMessageDeadlines();  // stops the thread

  uint64_t Arm(grpc::ServerContext* context, absl::Time deadline);
  void Disarm(uint64_t id);

 private:
  void Run();

  absl::Mutex mu_;
  std::map<uint64_t, std::pair<absl::Time, grpc::ServerContext*>> armed_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster::coordinator
