// A rank's place in a multi-process job: its torchrun identity, the rendezvous store, the
// communicators (the world; for hybrid_shard also its node's ranks and its peers on the other
// nodes) and a heartbeat that lets survivors name the rank that was lost when a collective
// fails. A single process gets a world of one with no transport at all.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/store.h"
#include "trainer/comm/traced_communicator.h"
#include "trainer/dist/dist_env.h"

namespace ringmaster::trainer {

class DistContext {
 public:
  // Rendezvous of every rank of `env` (a no-op for a single process). `node_groups` also builds
  // the intra-node and inter-node communicators (hybrid_shard). `timeout` bounds the rendezvous
  // and every later collective. `observer` (optional, must outlive the context) is told every
  // collective each communicator enters and leaves, numbered across all of them.
  static absl::StatusOr<std::unique_ptr<DistContext>> Create(
      const DistEnv& env, bool node_groups, absl::Duration timeout,
      CollectiveObserver* observer = nullptr);
  ~DistContext();

  const DistEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  Communicator* world() const { return world_.get(); }
  Communicator* intra() const { return intra_.get(); }  // null unless node_groups
  Communicator* inter() const { return inter_.get(); }
  absl::Duration timeout() const { return timeout_; }

  // After a failed collective: which ranks stopped beating their heart (lost) and which are
  // alive but did not complete (stalled), appended to `failure`'s message. Takes a few seconds.
  absl::Status Explain(const absl::Status& failure);

 private:
  DistContext() = default;
  static absl::StatusOr<std::unique_ptr<DistContext>> CreateUntraced(const DistEnv& env,
                                                                     bool node_groups,
                                                                     absl::Duration timeout);
  void Beat();

  DistEnv env_;
  absl::Duration timeout_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Store> scoped_;  // the store under this generation's prefix
  std::unique_ptr<Communicator> world_, intra_, inter_;
  // With an observer: the transports, wrapped by world_/intra_/inter_.
  std::unique_ptr<Communicator> raw_world_, raw_intra_, raw_inter_;
  std::atomic<uint64_t> collective_counter_{0};
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

// The collective timeout: RINGMASTER_COLLECTIVE_TIMEOUT_S (seconds) or 300 s.
absl::StatusOr<absl::Duration> CollectiveTimeoutFromEnv();

}  // namespace ringmaster::trainer
