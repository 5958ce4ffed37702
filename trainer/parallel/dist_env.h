// The process environment of a trainer, read here and nowhere else in the trainer's library: the
// torchrun-style variables a rank is started with (RANK, WORLD_SIZE, MASTER_ADDR, ...) and the
// coordinator's plan (DistEnv), the trainer's own RINGMASTER_* tuning (TrainerEnv), each parsed
// and validated once; and the rendezvous store DistEnv implies. The plan's variables are decoded
// with the codecs the planner encodes them with (jobspec/plan_vars.h).
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

// How the environment is read: a variable's value, nullopt when unset (a map in tests).
using GetEnv = std::function<std::optional<std::string>(const char*)>;

// This process's environment, through std::getenv: the only reader of it in the trainer's library.
GetEnv ProcessEnv();

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
  // "w0,w1,..." or with runs "w*k,..." (jobspec/plan_vars.h). Empty: equal shares.
  std::vector<double> rank_weights;
  // The coordinator's plan for this rank (coordinator/plan/planner.h), which ResolveRankSettings
  // (rank_settings.h) weighs against the job; nullopt (unset or empty) = the job's.
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
  // RINGMASTER_COLLECTIVE_TIMEOUT_S: how long one collective may wait for its peers (default
  // 300 s); then the rank reports which peer it waited for and exits.
  absl::Duration collective_timeout = absl::Seconds(300);
};

// Parses the environment through `getenv` (nullopt = unset). Integers parse strictly (no
// whitespace, sign only '-', nothing trailing); every error is InvalidArgument naming the
// variable and its value. Without WORLD_SIZE the process runs alone (distributed = false), but
// RANK set without WORLD_SIZE is an error. With WORLD_SIZE > 1 and no RINGMASTER_STORE_DIR,
// RANK, MASTER_ADDR and MASTER_PORT (1..65535) are required.
absl::StatusOr<DistEnv> ParseDistEnv(const GetEnv& getenv);

// ParseDistEnv over this process's environment.
absl::StatusOr<DistEnv> DistEnvFromProcess();

// The trainer's own variables: set by its agent or an operator, never by the job. Unset and
// empty are the same.
struct TrainerEnv {
  // RINGMASTER_ALLOWED_ROOT (an agent's --allowed-root): everything the trainer reads and writes
  // lies below it, reached through no link (common/open_beneath.h). Empty: unconfined.
  std::string allowed_root;
  // RINGMASTER_STATUS_FILE: the status block the agent reads (common/rank_status.h); empty:
  // figures in memory only.
  std::string status_file;
  // RINGMASTER_METRICS_PORT (0..65535): the first rank's /metrics port on this node (each rank
  // adds its LOCAL_RANK; 0 picks a free one). nullopt: unset.
  std::optional<int> metrics_port;
  // RINGMASTER_METRICS_HOST: where /metrics listens (default 127.0.0.1), and
  // RINGMASTER_METRICS_INSECURE_PUBLIC=1, which alone lets that be a non-loopback address.
  std::string metrics_host = "127.0.0.1";
  bool metrics_insecure_public = false;
  // RINGMASTER_EMULATED_CUDA_OK=1 (device_choice.h): a test lets the emulator run device cuda.
  bool emulated_cuda_ok = false;
  // RINGMASTER_SLOWDOWN (1..1000): this process computes that many times slower (slowdown.h).
  double slowdown = 1.0;
  // RINGMASTER_SLOW_LINK_GBITS (>= 0): below this all-reduce bus bandwidth, compression auto on
  // CPU ranks over several nodes picks int8 (default 5).
  double slow_link_gbits = 5.0;
  // RINGMASTER_TEST_POISON_GRAD_STEP (>= 1, tests only): the CUDA engine poisons that step's
  // gradient (the fp16 overflow tests). 0: never.
  int64_t poison_grad_step = 0;
  // RINGMASTER_CPU_ISA: the CPU engine's loops at this level (baseline, avx2, avx512;
  // trainer/model/cpu_isa.h) instead of the best this CPU runs. Empty: unset.
  std::string cpu_isa;
  // CUDA_VISIBLE_DEVICES as the agent set it (for the log line), "unset" when it is not.
  std::string cuda_visible_devices = "unset";
};

// Parses the trainer's variables; a malformed value is InvalidArgument naming the variable and
// its value.
absl::StatusOr<TrainerEnv> ParseTrainerEnv(const GetEnv& getenv);

// The store ranks rendezvous through: a FileStore on `env.store_dir` when set; otherwise a
// TcpStore on master_addr:master_port that rank 0 hosts and every rank connects to (within
// `timeout`). A lone process without MASTER_ADDR gets an in-process store.
//
// A FileStore directory keeps its keys across restarts; callers that rendezvous again after a
// restart should prefix keys with env.restart_count (PrefixStore).
absl::StatusOr<std::unique_ptr<Store>> MakeRendezvousStore(const DistEnv& env,
                                                           absl::Duration timeout);

}  // namespace ringmaster::trainer
