// The torchrun-style environment a rank is started with (RANK, WORLD_SIZE, MASTER_ADDR, ...),
// parsed and validated once, and the rendezvous store it implies.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "jobspec/job_settings.h"
#include "trainer/comm/store.h"

namespace ringmaster::trainer {

struct DistEnv {
  bool distributed = false;  // WORLD_SIZE was set.
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  int group_rank = 0;       // Node index (GROUP_RANK); default rank / local_world_size.
  int num_nodes = 1;        // GROUP_WORLD_SIZE; default world_size / local_world_size (rounded up).
  std::string master_addr;  // MASTER_ADDR.
  int master_port = 0;      // MASTER_PORT.
  // Port of our rendezvous store on MASTER_ADDR: RINGMASTER_STORE_PORT, else MASTER_PORT + 1
  // under torchrun (TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent holds MASTER_PORT),
  // else MASTER_PORT.
  int store_port = 0;
  // RINGMASTER_RANK_WEIGHTS: each rank's share of every global batch is proportional to its
  // weight (the control plane sets it from measured throughput for mixed GPU generations).
  // "w0,w1,..." or with runs "w*k,...". Empty: equal shares.
  std::vector<double> rank_weights;
  // The coordinator's plan for this rank (coordinator/plan/planner.h), overriding the job's
  // train.precision and distributed.compression; nullopt (unset or empty) = the job's.
  std::optional<jobspec::Device> device;            // RINGMASTER_DEVICE (cpu or cuda)
  std::optional<jobspec::Precision> precision;      // RINGMASTER_PRECISION
  std::optional<jobspec::Compression> compression;  // RINGMASTER_COMPRESSION
  int restart_count = 0;                            // TORCHELASTIC_RESTART_COUNT.
  std::string run_id;     // TORCHELASTIC_RUN_ID (the job); with restart_count, the store session
  std::string store_dir;  // RINGMASTER_STORE_DIR: rendezvous through a shared directory.
  // Interface or host Gloo listens on: RINGMASTER_GLOO_IFACE, else GLOO_SOCKET_IFNAME, else
  // "127.0.0.1" when MASTER_ADDR is unset or loopback (localhost, 127.x, ::1), else this
  // machine's hostname.
  std::string iface;
  // RINGMASTER_RENDEZVOUS_TIMEOUT_S: how long a rank waits for every peer of its generation to
  // arrive (default 600 s, torchrun's join timeout). Longer than the collective timeout on
  // purpose: a restarted generation's peer may start late while its agent stops the previous
  // generation's ranks; a peer that never comes is the control plane's to notice.
  absl::Duration rendezvous_timeout = absl::Seconds(600);
};

// Parses the environment through `getenv` (nullopt = unset). Integers parse strictly (no
// whitespace, sign only '-', nothing trailing); every error is InvalidArgument naming the
// variable and its value. Without WORLD_SIZE the process runs alone (distributed = false), but
// RANK set without WORLD_SIZE is an error. With WORLD_SIZE > 1 and no RINGMASTER_STORE_DIR,
// RANK, MASTER_ADDR and MASTER_PORT (1..65535) are required.
absl::StatusOr<DistEnv> ParseDistEnv(
    const std::function<std::optional<std::string>(const char*)>& getenv);

// ParseDistEnv over this process's environment.
absl::StatusOr<DistEnv> DistEnvFromProcess();

// The store ranks rendezvous through: a FileStore on `env.store_dir` when set; otherwise a
// TcpStore on master_addr:master_port that rank 0 hosts and every rank connects to (within
// `timeout`). A lone process without MASTER_ADDR gets an in-process store.
//
// A FileStore directory keeps its keys across restarts; callers that rendezvous again after a
// restart should prefix keys with env.restart_count (PrefixStore).
absl::StatusOr<std::unique_ptr<Store>> MakeRendezvousStore(const DistEnv& env,
                                                           absl::Duration timeout);

}  // namespace ringmaster::trainer
