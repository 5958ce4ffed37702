// Parsing and validation of the torchrun environment, and the rendezvous store it selects.
#include "trainer/parallel/dist_env.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/loopback.h"
#include "common/status_macros.h"
#include "jobspec/plan_vars.h"
#include "trainer/comm/tcp_store.h"

namespace ringmaster::trainer {
namespace {

// `name`=`text` as a whole decimal int: no whitespace, no '+', nothing trailing.
absl::StatusOr<int> ParseInt(const char* name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", text, " is out of range"));
  }
  if (text.empty() || ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", text, " is not an integer"));
  }
  return value;
}

// An integer variable, or `fallback` when unset. `*was_set` (optional) says which.
absl::StatusOr<int> IntVar(const GetEnv& getenv, const char* name, int fallback,
                           bool* was_set = nullptr) {
  std::optional<std::string> v = getenv(name);
  if (was_set != nullptr) *was_set = v.has_value();
  if (!v.has_value()) return fallback;
  return ParseInt(name, *v);
}

// A string variable; unset and empty are the same.
std::string StringVar(const GetEnv& getenv, const char* name) { return getenv(name).value_or(""); }

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// A setting of the coordinator's plan (jobspec/job_settings.h names); unset or empty = nullopt.
template <typename E>
absl::StatusOr<std::optional<E>> SettingVar(const GetEnv& getenv, const char* name) {
  const std::string v = StringVar(getenv, name);
  if (v.empty()) return std::optional<E>();
  absl::StatusOr<E> parsed = jobspec::ParseSettingOrError<E>(v);
  if (!parsed.ok()) {
    return Invalid(absl::StrCat(name, "=", v, ": ", parsed.status().message()));
  }
  return std::optional<E>(*parsed);
}

// "NAME=value", or "NAME=value (default)" for a value the environment did not give.
std::string Shown(const char* name, int value, bool was_set) {
  return absl::StrCat(name, "=", value, was_set ? "" : " (default)");
}

bool IsLoopback(const std::string& host) { return host.empty() || IsLoopbackHost(host); }

// A number variable in [lo, hi], or `fallback` when unset or empty; otherwise the error
// `Invalid(prefix + value + suffix)`.
absl::StatusOr<double> NumberVar(const GetEnv& getenv, const char* name, double fallback, double lo,
                                 double hi, const std::string& prefix, const std::string& suffix) {
  const std::string v = StringVar(getenv, name);
  if (v.empty()) return fallback;
  double x = 0;
  if (!absl::SimpleAtod(v, &x) || !(x >= lo) || !(x <= hi)) {
    return Invalid(absl::StrCat(prefix, v, suffix));
  }
  return x;
}

// The local address this host uses to reach `master_addr` (a UDP "connect" sends nothing; it
// only asks the kernel for the route). On the master's own host that is the master address
// itself -- never a loopback alias of the hostname, which is what Debian's /etc/hosts maps it to.
std::optional<std::string> SourceAddressTowards(const std::string& master_addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(master_addr.c_str(), "9", &hints, &res) != 0) return std::nullopt;
  std::optional<std::string> out;
  for (addrinfo* ai = res; ai != nullptr && !out; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char buf[INET6_ADDRSTRLEN] = {};
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* a =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, a, buf, sizeof(buf)) != nullptr) out = std::string(buf);
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

absl::StatusOr<std::string> DefaultIface(const GetEnv& getenv, const std::string& master_addr) {
  for (const char* name : {"RINGMASTER_GLOO_IFACE", "GLOO_SOCKET_IFNAME"}) {
    std::string v = StringVar(getenv, name);
    if (!v.empty()) return v;
  }
  if (IsLoopback(master_addr)) return std::string("127.0.0.1");
  if (!master_addr.empty()) {
    if (std::optional<std::string> src = SourceAddressTowards(master_addr)) return *src;
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host)) != 0 || host[0] == '\0') {
    return absl::InternalError(
        absl::StrCat("cannot determine the Gloo listen address: gethostname failed (",
                     std::strerror(errno), "); set RINGMASTER_GLOO_IFACE"));
  }
  return std::string(host);
}

}  // namespace

absl::StatusOr<DistEnv> ParseDistEnv(const GetEnv& getenv) {
  DistEnv env;
  env.store_dir = StringVar(getenv, "RINGMASTER_STORE_DIR");
  if (const std::string v = StringVar(getenv, "RINGMASTER_RENDEZVOUS_TIMEOUT_S"); !v.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0) || seconds > 86400 * 7) {
      return Invalid(absl::StrCat("RINGMASTER_RENDEZVOUS_TIMEOUT_S=", v,
                                  " is not a number of seconds in (0, 604800]"));
    }
    env.rendezvous_timeout = absl::Seconds(seconds);
  }
  if (const std::string v = StringVar(getenv, "RINGMASTER_COLLECTIVE_TIMEOUT_S"); !v.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(v, &seconds) || !(seconds > 0)) {
      return Invalid(absl::StrCat("RINGMASTER_COLLECTIVE_TIMEOUT_S=", v,
                                  " is not a positive number of seconds"));
    }
    env.collective_timeout = absl::Seconds(seconds);
  }
  env.master_addr = StringVar(getenv, "MASTER_ADDR");
  // The plan's per-rank settings apply to a lone process too (and are checked there).
  RM_ASSIGN_OR_RETURN(env.device, SettingVar<jobspec::Device>(getenv, jobspec::kDeviceVar));
  if (env.device == jobspec::Device::kAuto) {
    return Invalid(
        "RINGMASTER_DEVICE=auto: the plan names the rank's device (cpu or cuda); unset it to let "
        "train.device decide");
  }
  RM_ASSIGN_OR_RETURN(env.precision,
                      SettingVar<jobspec::Precision>(getenv, jobspec::kPrecisionVar));
  RM_ASSIGN_OR_RETURN(env.compression,
                      SettingVar<jobspec::Compression>(getenv, jobspec::kCompressionVar));

  std::optional<std::string> world = getenv("WORLD_SIZE");
  if (!world.has_value()) {
    if (std::optional<std::string> rank = getenv("RANK"); rank.has_value()) {
      return Invalid(absl::StrCat("RANK=", *rank, " is set but WORLD_SIZE is not"));
    }
    RM_ASSIGN_OR_RETURN(env.iface, DefaultIface(getenv, env.master_addr));
    return env;
  }
  env.distributed = true;
  RM_ASSIGN_OR_RETURN(env.world_size, ParseInt("WORLD_SIZE", *world));
  if (env.world_size < 1) {
    return Invalid(absl::StrCat("WORLD_SIZE=", env.world_size, " must be at least 1"));
  }

  bool rank_set = false;
  RM_ASSIGN_OR_RETURN(env.rank, IntVar(getenv, "RANK", 0, &rank_set));
  if (!rank_set && env.world_size > 1) {
    return Invalid(absl::StrCat("RANK is required when WORLD_SIZE=", env.world_size));
  }
  if (env.rank < 0) return Invalid(absl::StrCat("RANK=", env.rank, " is negative"));
  if (env.rank >= env.world_size) {
    return Invalid(absl::StrCat("RANK=", env.rank, " is not below WORLD_SIZE=", env.world_size));
  }

  bool lws_set = false;
  RM_ASSIGN_OR_RETURN(env.local_world_size, IntVar(getenv, "LOCAL_WORLD_SIZE", 1, &lws_set));
  if (env.local_world_size < 1) {
    return Invalid(absl::StrCat("LOCAL_WORLD_SIZE=", env.local_world_size, " must be at least 1"));
  }
  if (env.local_world_size > env.world_size) {
    return Invalid(absl::StrCat("LOCAL_WORLD_SIZE=", env.local_world_size,
                                " exceeds WORLD_SIZE=", env.world_size));
  }
  RM_ASSIGN_OR_RETURN(env.local_rank, IntVar(getenv, "LOCAL_RANK", 0));
  if (env.local_rank < 0) {
    return Invalid(absl::StrCat("LOCAL_RANK=", env.local_rank, " is negative"));
  }
  if (env.local_rank >= env.local_world_size) {
    return Invalid(absl::StrCat("LOCAL_RANK=", env.local_rank, " is not below ",
                                Shown("LOCAL_WORLD_SIZE", env.local_world_size, lws_set)));
  }

  bool nodes_set = false;
  RM_ASSIGN_OR_RETURN(
      env.num_nodes,
      IntVar(getenv, "GROUP_WORLD_SIZE",
             (env.world_size + env.local_world_size - 1) / env.local_world_size, &nodes_set));
  if (env.num_nodes < 1 || env.num_nodes > env.world_size) {
    return Invalid(absl::StrCat("GROUP_WORLD_SIZE=", env.num_nodes,
                                " is not in 1..WORLD_SIZE=", env.world_size));
  }
  bool group_set = false;
  RM_ASSIGN_OR_RETURN(env.group_rank,
                      IntVar(getenv, "GROUP_RANK", env.rank / env.local_world_size, &group_set));
  if (env.group_rank < 0 || env.group_rank >= env.num_nodes) {
    return Invalid(absl::StrCat(Shown("GROUP_RANK", env.group_rank, group_set), " is not in 0..",
                                Shown("GROUP_WORLD_SIZE", env.num_nodes, nodes_set), "-1"));
  }

  RM_ASSIGN_OR_RETURN(env.restart_count, IntVar(getenv, "TORCHELASTIC_RESTART_COUNT", 0));
  if (env.restart_count < 0) {
    return Invalid(absl::StrCat("TORCHELASTIC_RESTART_COUNT=", env.restart_count, " is negative"));
  }
  env.run_id = StringVar(getenv, "TORCHELASTIC_RUN_ID");

  bool port_set = false;
  RM_ASSIGN_OR_RETURN(env.master_port, IntVar(getenv, "MASTER_PORT", 0, &port_set));
  if (port_set && (env.master_port < 1 || env.master_port > 65535)) {
    return Invalid(absl::StrCat("MASTER_PORT=", env.master_port, " is not in 1..65535"));
  }
  if (env.world_size > 1 && env.store_dir.empty()) {
    if (env.master_addr.empty()) {
      return Invalid(absl::StrCat("MASTER_ADDR is required when WORLD_SIZE=", env.world_size,
                                  " (or set RINGMASTER_STORE_DIR)"));
    }
    if (!port_set) {
      return Invalid(absl::StrCat("MASTER_PORT is required when WORLD_SIZE=", env.world_size,
                                  " (or set RINGMASTER_STORE_DIR)"));
    }
  }

  // Our store's port. Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) torchrun's own agent
  // already listens on MASTER_PORT with PyTorch's store, whose protocol is not ours: rank 0
  // then hosts ours on MASTER_PORT + 1. RINGMASTER_STORE_PORT overrides both.
  env.store_port = env.master_port;
  if (StringVar(getenv, "TORCHELASTIC_USE_AGENT_STORE") == "True" && port_set) {
    env.store_port = env.master_port < 65535 ? env.master_port + 1 : env.master_port - 1;
  }
  bool store_port_set = false;
  int store_port = 0;
  RM_ASSIGN_OR_RETURN(store_port, IntVar(getenv, "RINGMASTER_STORE_PORT", 0, &store_port_set));
  if (store_port_set) {
    if (store_port < 1 || store_port > 65535) {
      return Invalid(absl::StrCat("RINGMASTER_STORE_PORT=", store_port, " is not in 1..65535"));
    }
    env.store_port = store_port;
  }

  // Per-rank shares of the global batch (mixed GPU generations), in the planner's codec.
  RM_ASSIGN_OR_RETURN(
      env.rank_weights,
      jobspec::ParseRankWeights(StringVar(getenv, jobspec::kRankWeightsVar), env.world_size));

  RM_ASSIGN_OR_RETURN(env.iface, DefaultIface(getenv, env.master_addr));
  return env;
}

GetEnv ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<DistEnv> DistEnvFromProcess() { return ParseDistEnv(ProcessEnv()); }

absl::StatusOr<TrainerEnv> ParseTrainerEnv(const GetEnv& getenv) {
  TrainerEnv t;
  t.allowed_root = StringVar(getenv, "RINGMASTER_ALLOWED_ROOT");
  t.status_file = StringVar(getenv, "RINGMASTER_STATUS_FILE");
  if (const std::string v = StringVar(getenv, "RINGMASTER_METRICS_PORT"); !v.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(v, &p) || p < 0 || p > 65535) {
      return Invalid(absl::StrCat("RINGMASTER_METRICS_PORT=", v, " is not a port number"));
    }
    t.metrics_port = p;
  }
  if (const std::string v = StringVar(getenv, "RINGMASTER_METRICS_HOST"); !v.empty()) {
    t.metrics_host = v;
  }
  t.metrics_insecure_public = StringVar(getenv, "RINGMASTER_METRICS_INSECURE_PUBLIC") == "1";
  t.emulated_cuda_ok = StringVar(getenv, "RINGMASTER_EMULATED_CUDA_OK") == "1";
  RM_ASSIGN_OR_RETURN(
      t.slowdown, NumberVar(getenv, "RINGMASTER_SLOWDOWN", 1.0, 1.0, 1000.0,
                            "RINGMASTER_SLOWDOWN='", "': expected a factor between 1 and 1000"));
  RM_ASSIGN_OR_RETURN(t.slow_link_gbits,
                      NumberVar(getenv, "RINGMASTER_SLOW_LINK_GBITS", 5.0, 0.0, HUGE_VAL,
                                "RINGMASTER_SLOW_LINK_GBITS=", " is not a number of Gbit/s"));
  if (const std::string v = StringVar(getenv, "RINGMASTER_TEST_POISON_GRAD_STEP"); !v.empty()) {
    if (!absl::SimpleAtoi(v, &t.poison_grad_step) || t.poison_grad_step < 1) {
      return Invalid(
          absl::StrCat("RINGMASTER_TEST_POISON_GRAD_STEP: expected a step >= 1, got '", v, "'"));
    }
  }
  t.cpu_isa = StringVar(getenv, "RINGMASTER_CPU_ISA");
  if (std::optional<std::string> v = getenv("CUDA_VISIBLE_DEVICES")) t.cuda_visible_devices = *v;
  return t;
}

absl::StatusOr<std::unique_ptr<Store>> MakeRendezvousStore(const DistEnv& env,
                                                           absl::Duration timeout) {
  if (!env.store_dir.empty()) {
    RM_ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store, FileStore::Create(env.store_dir));
    return std::unique_ptr<Store>(std::move(store));
  }
  if (env.master_addr.empty()) {
    if (env.world_size == 1) return std::unique_ptr<Store>(std::make_unique<FakeStore>());
    return absl::InvalidArgumentError(absl::StrCat("rendezvous for WORLD_SIZE=", env.world_size,
                                                   " needs MASTER_ADDR or RINGMASTER_STORE_DIR"));
  }
  RM_ASSIGN_OR_RETURN(std::unique_ptr<TcpStore> store,
                      TcpStore::Create(env.master_addr, env.store_port,
                                       /*is_server=*/env.rank == 0, timeout,
                                       absl::StrCat(env.run_id, "/gen", env.restart_count)));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace ringmaster::trainer
