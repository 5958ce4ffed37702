#include "trainer/parallel/dist_context.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/comm/gloo_communicator.h"
#include "trainer/comm/local_communicator.h"

namespace ringmaster::trainer {
namespace {

constexpr auto kBeatEvery = std::chrono::milliseconds(500);
// A rank whose heartbeat did not move for this long is lost.
constexpr auto kLostAfter = std::chrono::milliseconds(2500);

}  // namespace

absl::StatusOr<CommBackend> ResolveCommBackend(CommBackend requested, bool cuda_rank,
                                               bool nccl_built) {
  switch (requested) {
    case CommBackend::kAuto:
      return cuda_rank && nccl_built ? CommBackend::kNccl : CommBackend::kGloo;
    case CommBackend::kGloo:
      return CommBackend::kGloo;
    case CommBackend::kNccl:
      if (!nccl_built) {
        return absl::InvalidArgumentError(
            "distributed.backend: nccl, but this trainer was built without NCCL (no nccl.h and "
            "libnccl found at configure time; see trainer/comm/CMakeLists.txt); use auto or gloo");
      }
      if (!cuda_rank) {
        return absl::InvalidArgumentError(
            "distributed.backend: nccl needs a rank on a CUDA device, and this rank computes on "
            "the CPU; use auto or gloo");
      }
      return CommBackend::kNccl;
  }
  return absl::InvalidArgumentError("distributed.backend: unknown value");
}

absl::StatusOr<std::unique_ptr<DistContext>> DistContext::Create(const DistEnv& env,
                                                                 bool node_groups,
                                                                 absl::Duration timeout,
                                                                 CollectiveObserver* observer,
                                                                 const CommChoice& comm) {
  RM_ASSIGN_OR_RETURN(std::unique_ptr<DistContext> c,
                      CreateUntraced(env, node_groups, timeout, comm));
  if (observer != nullptr) {
    auto wrap = [&](std::unique_ptr<Communicator>& comm, std::unique_ptr<Communicator>& raw) {
      if (comm == nullptr) return;
      raw = std::move(comm);
      comm = std::make_unique<TracedCommunicator>(raw.get(), observer, &c->collective_counter_);
    };
    wrap(c->world_, c->raw_world_);
    wrap(c->intra_, c->raw_intra_);
    wrap(c->inter_, c->raw_inter_);
  }
  return c;
}

absl::StatusOr<std::unique_ptr<DistContext>> DistContext::CreateUntraced(const DistEnv& env,
                                                                         bool node_groups,
                                                                         absl::Duration timeout,
                                                                         const CommChoice& comm) {
  RM_ASSIGN_OR_RETURN(
      const CommBackend backend,
      ResolveCommBackend(comm.backend, comm.cuda_device >= 0, comm.nccl != nullptr));
  std::unique_ptr<DistContext> c(new DistContext());
  c->env_ = env;
  c->timeout_ = timeout;
  c->backend_ = backend;
  const std::string host = env.iface.empty() ? "127.0.0.1" : env.iface;
  // One communicator of `size` ranks, rendezvousing under `prefix` of `store`.
  auto make = [&](Store& store, const std::string& prefix, int rank,
                  int size) -> absl::StatusOr<std::unique_ptr<Communicator>> {
    PrefixStore scoped(prefix, store);
    if (backend == CommBackend::kNccl) {
      return comm.nccl(scoped, rank, size, comm.cuda_device, timeout);
    }
    return GlooCommunicator::Create(scoped, rank, size, host, timeout);
  };
  if (!env.distributed || env.world_size == 1) {
    if (backend == CommBackend::kNccl) {
      // A CUDA rank alone still gets an NCCL communicator: its collectives take device memory,
      // which the LocalCommunicator (host copies) cannot. The rendezvous is in-process.
      c->store_ = std::make_unique<FakeStore>();
      RM_ASSIGN_OR_RETURN(c->world_, make(*c->store_, "world/", 0, 1));
      if (node_groups) {
        RM_ASSIGN_OR_RETURN(c->intra_, make(*c->store_, "intra/", 0, 1));
        RM_ASSIGN_OR_RETURN(c->inter_, make(*c->store_, "inter/", 0, 1));
      }
      return c;
    }
    c->world_ = std::make_unique<LocalCommunicator>();
    if (node_groups) {
      c->intra_ = std::make_unique<LocalCommunicator>();
      c->inter_ = std::make_unique<LocalCommunicator>();
    }
    return c;
  }
  if (node_groups && env.world_size != env.local_world_size * env.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hybrid_shard needs the same number of ranks on every node: WORLD_SIZE=", env.world_size,
        " is not LOCAL_WORLD_SIZE=", env.local_world_size, " x ", env.num_nodes, " nodes"));
  }
  // Peers may arrive late (a restarted generation's peer waits for its agent to stop the old
  // ranks): until every rank is here the wait is bounded by the rendezvous timeout, then the
  // transports connect and every collective is bounded by the collective timeout.
  const absl::Duration arrival = std::max(env.rendezvous_timeout, timeout);
  RM_ASSIGN_OR_RETURN(c->store_, MakeRendezvousStore(env, arrival));
  // A restarted job must not meet the addresses of its previous generation.
  c->scoped_ =
      std::make_unique<PrefixStore>(absl::StrCat("gen", env.restart_count, "/"), *c->store_);
  RM_RETURN_IF_ERROR(c->AwaitPeers(arrival));
  RM_ASSIGN_OR_RETURN(c->world_, make(*c->scoped_, "world/", env.rank, env.world_size));
  if (node_groups) {
    RM_ASSIGN_OR_RETURN(c->intra_, make(*c->scoped_, absl::StrCat("intra", env.group_rank, "/"),
                                        env.local_rank, env.local_world_size));
    RM_ASSIGN_OR_RETURN(c->inter_, make(*c->scoped_, absl::StrCat("inter", env.local_rank, "/"),
                                        env.group_rank, env.num_nodes));
  }
  c->heartbeat_ = std::thread([p = c.get()] { p->Beat(); });
  return c;
}

absl::Status DistContext::AwaitPeers(absl::Duration within) {
  RM_RETURN_IF_ERROR(scoped_->Set(absl::StrCat("arrived/", env_.rank), "1"));
  std::vector<std::string> keys;
  for (int r = 0; r < env_.world_size; ++r) keys.push_back(absl::StrCat("arrived/", r));
  if (absl::Status s = scoped_->Wait(keys, within); !s.ok()) {
    return absl::Status(s.code(), absl::StrFormat("rendezvous of rank %d of %d (generation %d): "
                                                  "not every peer arrived within %s "
                                                  "(RINGMASTER_RENDEZVOUS_TIMEOUT_S): %s",
                                                  env_.rank, env_.world_size, env_.restart_count,
                                                  absl::FormatDuration(within), s.message()));
  }
  return absl::OkStatus();
}

DistContext::~DistContext() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void DistContext::Beat() {
  const std::string key = absl::StrCat("hb/", env_.rank);
  uint64_t n = 0;
  while (!stop_) {
    // A failing store (its host died) just stops the beats; Explain reports it.
    if (!scoped_->Set(key, absl::StrCat(++n)).ok()) return;
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(kBeatEvery / 10);
  }
}

absl::Status DistContext::Explain(const absl::Status& failure) {
  if (scoped_ == nullptr || failure.ok()) return failure;
  // Survivors say so first: a survivor that has already exited must not count as lost.
  scoped_->Set(absl::StrCat("failed/", env_.rank), "1").IgnoreError();
  auto present = [&](const std::string& key) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> v = scoped_->Get(key, absl::Milliseconds(200));
    if (!v.ok() && v.status().code() == absl::StatusCode::kDeadlineExceeded) return std::string();
    return v;
  };
  auto read_beats = [&](std::vector<std::string>* beats) -> absl::Status {
    beats->assign(env_.world_size, "");
    for (int r = 0; r < env_.world_size; ++r) {
      if (r == env_.rank) continue;
      RM_ASSIGN_OR_RETURN((*beats)[r], present(absl::StrCat("hb/", r)));
    }
    return absl::OkStatus();
  };
  std::vector<std::string> before, after;
  std::vector<std::string> lost;
  absl::Status s = read_beats(&before);
  if (s.ok()) {
    std::this_thread::sleep_for(kLostAfter);
    s = read_beats(&after);
  }
  for (int r = 0; s.ok() && r < env_.world_size; ++r) {
    if (r == env_.rank || before[r] != after[r]) continue;
    absl::StatusOr<std::string> reported = present(absl::StrCat("failed/", r));
    if (!reported.ok()) {
      s = reported.status();
    } else if (reported->empty()) {
      lost.push_back(absl::StrCat(r));
    }
  }
  if (!s.ok()) {
    const std::string where = env_.store_dir.empty()
                                  ? absl::StrCat("rank 0 (it hosts the rendezvous store at ",
                                                 env_.master_addr, ":", env_.master_port, ")")
                                  : absl::StrCat("the rendezvous directory ", env_.store_dir);
    return absl::Status(failure.code(), absl::StrCat(failure.message(), "; lost: ", where,
                                                     " is unreachable: ", s.message()));
  }
  if (env_.rank == 0 && env_.store_dir.empty()) {
    // This process hosts the store: stay until the other survivors have read it (bounded).
    std::vector<std::string> keys;
    for (int r = 1; r < env_.world_size; ++r) {
      if (std::find(lost.begin(), lost.end(), absl::StrCat(r)) == lost.end()) {
        keys.push_back(absl::StrCat("failed/", r));
      }
    }
    scoped_->Wait(keys, absl::FromChrono(kLostAfter) * 2).IgnoreError();
    std::this_thread::sleep_for(kLostAfter);
  }
  std::string what;
  if (!lost.empty()) {
    absl::StrAppend(&what, "; lost rank", lost.size() > 1 ? "s " : " ", absl::StrJoin(lost, ", "),
                    " (no heartbeat for ", absl::FormatDuration(absl::FromChrono(kLostAfter)), ")");
  } else {
    absl::StrAppend(&what,
                    "; no rank was lost: every rank is alive, one stalled inside the collective");
  }
  return absl::Status(failure.code(), absl::StrCat(failure.message(), what));
}

}  // namespace ringmaster::trainer
