// A rank's place in a multi-process job: its torchrun identity, the rendezvous store, the
// communicators (the world; for hybrid_shard also its node's ranks and its peers on the other
// nodes) and a heartbeat that lets survivors name the rank that was lost when a collective
// fails. A single process gets a world of one with no transport at all.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobspec/job_settings.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/store.h"
#include "trainer/comm/traced_communicator.h"
#include "trainer/parallel/dist_env.h"

namespace ringmaster::trainer {

// The transport of a rank's collectives: the job's typed `distributed.backend`.
using CommBackend = jobspec::Backend;

// NcclCommunicator::Create (trainer/comm/nccl_communicator.h), for programs that link it.
using NcclCommunicatorFactory = absl::StatusOr<std::unique_ptr<Communicator>> (*)(
    Store& store, int rank, int size, int device, absl::Duration timeout);

// How DistContext builds the communicators of this rank.
struct CommChoice {
  CommBackend backend = CommBackend::kAuto;
  int cuda_device = -1;  // The CUDA device this rank computes on; -1 for a CPU rank.
  // Null where the program was built without NCCL (the `ringmaster_nccl_communicator` target
  // defines RINGMASTER_HAVE_NCCL for the code that links it).
  NcclCommunicatorFactory nccl = nullptr;
};

// The backend `requested` resolves to (kNccl or kGloo): auto is NCCL for a CUDA rank when NCCL
// was built, else Gloo (a CUDA rank on Gloo must stage its buffers through host memory). nccl
// without NCCL built, or on a CPU rank, is InvalidArgument naming the setting.
absl::StatusOr<CommBackend> ResolveCommBackend(CommBackend requested, bool cuda_rank,
                                               bool nccl_built);

class DistContext {
 public:
  // Rendezvous of every rank of `env` (a no-op for a single CPU process). `node_groups` also
  // builds the intra-node and inter-node communicators (hybrid_shard). Ranks wait for every
  // peer to arrive for the longer of env.rendezvous_timeout and `timeout`; `timeout` bounds
  // connecting the transports once all are there and every later collective. `observer` (optional,
  // must outlive the context) is told every collective each communicator enters and leaves,
  // numbered across all of them. `comm` picks the backend (ResolveCommBackend); a single process
  // gets a LocalCommunicator, or for a CUDA rank on NCCL an NCCL communicator of one (collectives
  // on device memory).
  static absl::StatusOr<std::unique_ptr<DistContext>> Create(const DistEnv& env, bool node_groups,
                                                             absl::Duration timeout,
                                                             CollectiveObserver* observer = nullptr,
                                                             const CommChoice& comm = CommChoice());
  ~DistContext();

  const DistEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  Communicator* world() const { return world_.get(); }
  Communicator* intra() const { return intra_.get(); }  // null unless node_groups
  Communicator* inter() const { return inter_.get(); }
  absl::Duration timeout() const { return timeout_; }
  CommBackend backend() const { return backend_; }  // kNccl or kGloo (kGloo for a world of one)

  // After a failed collective: which ranks stopped beating their heart (lost) and which are
  // alive but did not complete (stalled), appended to `failure`'s message. Takes a few seconds.
  absl::Status Explain(const absl::Status& failure);

 private:
  DistContext() = default;
  static absl::StatusOr<std::unique_ptr<DistContext>> CreateUntraced(const DistEnv& env,
                                                                     bool node_groups,
                                                                     absl::Duration timeout,
                                                                     const CommChoice& comm);
  void Beat();
  // Marks this rank arrived in the generation's store and waits until every rank has.
  absl::Status AwaitPeers(absl::Duration within);

  DistEnv env_;
  absl::Duration timeout_;
  CommBackend backend_ = CommBackend::kGloo;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Store> scoped_;  // the store under this generation's prefix
  std::unique_ptr<Communicator> world_, intra_, inter_;
  // With an observer: the transports, wrapped by world_/intra_/inter_.
  std::unique_ptr<Communicator> raw_world_, raw_intra_, raw_inter_;
  std::atomic<uint64_t> collective_counter_{0};
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

}  // namespace ringmaster::trainer
