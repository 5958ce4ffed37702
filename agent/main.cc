// ringmaster-agent: one per node. Registers the node with the coordinator, starts and supervises
// the trainer ranks it is told to run, and reports on them (see agent.h).
//
//   ringmaster-agent --coordinator HOST:PORT --trainer PATH --work-dir DIR [--name NAME]
//                    [--identity-file FILE]
//                    [--rack LABEL] [--address ADDR]... [--inventory-override GPUS]
//                    [--log-max-bytes N] [--log-keep N] [--throughput auto|off|SAMPLES_PER_S]
//                    [--metrics-listen HOST:PORT] [--metrics-insecure-public]
//                    [--tls-ca FILE] [--tls-cert FILE --tls-key FILE] [--tls-server-name NAME]
//                    | --insecure-loopback  [--join-token-file FILE]
//
// TLS to the coordinator by default: --tls-ca is the CA its certificate must chain to (default:
// the system's roots), --tls-cert/--tls-key the agent's own for mutual TLS, --tls-server-name
// the name the coordinator's certificate carries when --coordinator names it otherwise (an
// address, a load balancer). --insecure-loopback:
// plaintext, only to a loopback --coordinator. The join token comes from --join-token-file, else
// $RINGMASTER_JOIN_TOKEN, and is never passed on to trainers (docs/operations.md, Security).
// --throughput: auto (default) runs the trainer's `probe` once and caches the figure in the work
// dir (agent/throughput_probe.h); off reports none (the planner then weighs by GPU model); a
// number reports that figure as measured elsewhere.
//
// --allowed-root DIR (repeatable): every path a job names (data, model, output) must lie inside
// one of these directories, symlinks followed (agent/path_policy.h); without it any path goes.
// --metrics-listen on a non-loopback address needs --metrics-insecure-public: /metrics is
// plaintext and unauthenticated.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/grpc_coordinator_link.h"
#include "agent/inventory.h"
#include "agent/process_launcher.h"
#include "agent/rank_supervisor.h"
#include "agent/throughput_probe.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/log_escape.h"
#include "security/loopback.h"
#include "security/secret.h"
#include "security/tls_credentials.h"

extern char** environ;

namespace ra = ringmaster::agent;

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

int Fail(const std::string& msg) {
  ringmaster::LogError(msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ringmaster::SetLogProgramName("ringmaster-agent");
  // Commands from the coordinator (job ids, reasons) reach this log: none may forge a line.
  ringmaster::SetLogEscapeControlCharacters(true);
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex deadlock detection on: a
  // third of the coordinator's time at 4096 nodes (coordinator/bench/bench_scale.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> addresses;
  std::vector<std::string> allowed_roots;
  bool insecure_loopback = false;
  bool metrics_insecure_public = false;
  ringmaster::FlagSet fs("ringmaster-agent",
                         "one per node: registers it, runs and supervises its trainer ranks");
  // Every valued flag lands in `flags` by name (fs.value); only the lists need their own.
  fs.Value("--coordinator", "HOST:PORT", nullptr, "required", "the coordinator's address");
  fs.Value("--trainer", "PATH", nullptr, "required", "the ringmaster-trainer binary to run");
  fs.Value("--work-dir", "DIR", nullptr, "required",
           "where rank logs, status files and the throughput cache go (created)");
  fs.Value("--name", "NAME", nullptr, "the host name", "this node's name");
  fs.Value("--identity-file", "FILE", nullptr, "<work dir>/node-identity",
           "where the node id and secret are kept (0600) so that a restarted agent takes its\n"
           "node back; lost, the name is refused until `ringmaster nodes forget NAME`");
  fs.Value("--rack", "LABEL", nullptr, "none", "rack label, for placement");
  fs.List("--address", "ADDR", &addresses,
          "an address ranks on other nodes reach this node at (default: the host's\n"
          "non-loopback IPv4 addresses)");
  fs.Value("--inventory-override", "'COUNTxNAME:sm_XY:MEM[,...]' | none", nullptr,
           "the detected GPUs", "report these GPUs instead of the detected ones");
  fs.Value("--log-max-bytes", "N", nullptr, "67108864 (64 MiB)",
           "rotate a rank's log past N bytes (>= 4096)");
  fs.Value("--log-keep", "N", nullptr, "3", "rotated rank logs kept (>= 0)");
  fs.Value("--throughput", "auto|off|SAMPLES_PER_S", nullptr, "auto",
           "auto: run the trainer's probe once and cache it; off: report none (the planner\n"
           "weighs by GPU model); a number: report that figure");
  fs.Value("--metrics-listen", "HOST:PORT", nullptr, "none (no /metrics)",
           "serves Prometheus' /metrics there (agent, GPUs, local ranks)");
  fs.Value("--tls-ca", "FILE", nullptr, "the system's roots",
           "CA the coordinator's certificate chains to");
  fs.Value("--tls-cert", "FILE", nullptr, "none", "the agent's certificate, for mutual TLS");
  fs.Value("--tls-key", "FILE", nullptr, "none", "its private key");
  fs.Value("--tls-server-name", "NAME", nullptr, "the --coordinator host",
           "the name in the coordinator's certificate, when --coordinator names it otherwise");
  fs.Switch("--insecure-loopback", &insecure_loopback,
            "plaintext instead of TLS; only to a loopback --coordinator");
  fs.Switch("--metrics-insecure-public", &metrics_insecure_public,
            "allow a non-loopback --metrics-listen (plaintext, unauthenticated /metrics)");
  fs.Value("--join-token-file", "FILE", nullptr, "$RINGMASTER_JOIN_TOKEN, else none",
           "the token the coordinator asks for at registration (never passed to trainers)");
  fs.List("--allowed-root", "DIR", &allowed_roots,
          "every path a job names must lie inside one of these (default: any path)");
  if (std::optional<int> exit_code = fs.ParseOrExit(argc, argv)) return *exit_code;
  if (!fs.positional().empty()) {
    return Fail(absl::StrCat("unexpected argument '", fs.positional()[0],
                             "' (see ringmaster-agent --help)"));
  }
  std::map<std::string, std::string> flags;
  for (const char* name :
       {"--coordinator", "--trainer", "--work-dir", "--name", "--identity-file", "--rack",
        "--inventory-override", "--log-max-bytes", "--log-keep", "--throughput", "--metrics-listen",
        "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name", "--join-token-file"}) {
    if (std::optional<std::string> v = fs.value(name)) flags[name] = *v;
  }
  for (const char* required : {"--coordinator", "--trainer", "--work-dir"}) {
    if (!flags.count(required))
      return Fail(absl::StrCat(required, " is required (see ringmaster-agent --help)"));
  }
  // /metrics is plaintext and unauthenticated: beyond this machine only when asked for.
  if (flags.count("--metrics-listen") && !metrics_insecure_public &&
      !ringmaster::security::IsLoopbackAddress(flags["--metrics-listen"])) {
    return Fail(absl::StrCat(
        "--metrics-listen ", flags["--metrics-listen"],
        ": not a loopback address, and /metrics is served in plaintext without authentication; "
        "listen on 127.0.0.1, or add --metrics-insecure-public to serve it there anyway (and "
        "firewall it to your Prometheus)"));
  }
  // Transport and join token before anything slow, so a misconfigured agent stops at once.
  ringmaster::security::TlsOptions tls;
  tls.ca_file = flags["--tls-ca"];
  tls.cert_file = flags["--tls-cert"];
  tls.key_file = flags["--tls-key"];
  tls.server_name = flags["--tls-server-name"];
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ringmaster::security::ControlPlaneChannel(flags["--coordinator"], tls, insecure_loopback);
  if (!channel.ok()) return Fail(std::string(channel.status().message()));
  absl::StatusOr<std::optional<std::string>> join_token = ringmaster::security::ReadSecret(
      "join token", flags["--join-token-file"], "RINGMASTER_JOIN_TOKEN");
  if (!join_token.ok()) return Fail(std::string(join_token.status().message()));

  std::error_code ec;
  const std::string trainer = std::filesystem::absolute(flags["--trainer"], ec).string();
  if (ec || ::access(trainer.c_str(), X_OK) != 0) {
    return Fail(absl::StrCat("--trainer ", flags["--trainer"], ": not an executable file"));
  }
  const std::string work_dir = std::filesystem::absolute(flags["--work-dir"], ec).string();
  if (absl::Status s = ringmaster::MakeDirs(work_dir); !s.ok()) return Fail(s.ToString());
  for (std::string& root : allowed_roots) {
    const std::filesystem::path abs = std::filesystem::absolute(root, ec);
    if (ec || !std::filesystem::is_directory(abs, ec)) {
      return Fail(absl::StrCat("--allowed-root ", root, ": not a directory"));
    }
    root = abs.string();
  }

  ra::ProcessLauncherOptions lopts;
  if (flags.count("--log-max-bytes") &&
      (!absl::SimpleAtoi(flags["--log-max-bytes"], &lopts.log_max_bytes) ||
       lopts.log_max_bytes < 4096)) {
    return Fail("--log-max-bytes: expected an integer >= 4096");
  }
  if (flags.count("--log-keep") &&
      (!absl::SimpleAtoi(flags["--log-keep"], &lopts.log_keep) || lopts.log_keep < 0)) {
    return Fail("--log-keep: expected an integer >= 0");
  }

  ra::InventoryOptions iopts;
  iopts.node_name = flags["--name"];
  iopts.rack = flags["--rack"];
  iopts.addresses = addresses;
  iopts.gpu_override = flags["--inventory-override"];
  absl::StatusOr<ringmaster::v1::NodeInventory> inv = ra::CollectInventory(iopts);
  if (!inv.ok()) return Fail(inv.status().ToString());

  const std::string throughput = flags.count("--throughput") ? flags["--throughput"] : "auto";
  if (throughput == "auto") {
    ra::ThroughputProbeOptions popts;
    popts.trainer_path = trainer;
    popts.work_dir = work_dir;
    popts.device = absl::StrCat("cpu:", inv->cpu_cores());
    for (const auto& g : inv->gpus()) absl::StrAppend(&popts.device, ",", g.name());
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (size_t eq = kv.find('='); eq != std::string::npos) {
        popts.env[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    }
    popts.env.erase("RINGMASTER_JOIN_TOKEN");  // the trainer has no use for the agent's secret
    popts.env.emplace("OMP_NUM_THREADS", std::to_string(std::max<uint32_t>(1, inv->cpu_cores())));
    ra::ProcessLauncher probe_launcher(ra::ProcessLauncherOptions{});
    absl::StatusOr<ra::ThroughputMeasurement> m =
        ra::MeasureTrainerThroughput(popts, probe_launcher);
    if (m.ok()) {
      inv->set_trainer_samples_per_second(m->samples_per_second);
      ringmaster::LogInfo(absl::StrFormat("trainer throughput %.1f samples/s (%s)",
                                          m->samples_per_second,
                                          m->cached ? "cached" : "measured now"));
    } else {
      ringmaster::LogError(absl::StrCat("not reporting a throughput: ", m.status().ToString()));
    }
  } else if (throughput != "off") {
    double v = 0;
    if (!absl::SimpleAtod(throughput, &v) || !(v > 0)) {
      return Fail("--throughput: expected auto, off or a number of samples/s > 0");
    }
    inv->set_trainer_samples_per_second(v);
  }

  ra::SupervisorOptions sopts;
  sopts.trainer_path = trainer;
  sopts.work_dir = work_dir;
  sopts.cpu_cores = static_cast<int>(inv->cpu_cores());
  sopts.allowed_roots = allowed_roots;
  if (!allowed_roots.empty()) {
    ringmaster::LogInfo(absl::StrCat("job paths confined to ", absl::StrJoin(allowed_roots, ", ")));
  }
  ra::ProcessLauncher launcher(lopts);
  ra::RankSupervisor ranks(sopts, &launcher, [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
  ra::GrpcCoordinatorLink link(*std::move(channel), join_token->value_or(std::string()));
  link.set_target({flags["--coordinator"], insecure_loopback, "--coordinator"});
  ra::AgentOptions aopts;
  aopts.inventory = *inv;
  // The node secret across agent restarts (agent/node_identity.h).
  aopts.identity_file = flags.count("--identity-file")
                            ? std::filesystem::absolute(flags["--identity-file"], ec).string()
                            : work_dir + "/node-identity";
  ra::Agent agent(aopts, &link, &ranks, [] { return absl::Now(); });
  // /metrics: the agent's own state, its GPUs (NVML, where a driver is installed) and every
  // local rank's figures (docs/metrics.md).
  std::unique_ptr<ra::GpuMonitor> gpus;
  if (flags.count("--metrics-listen")) {
    absl::StatusOr<std::unique_ptr<ra::GpuMonitor>> nvml = ra::OpenNvmlMonitor();
    if (nvml.ok()) {
      gpus = *std::move(nvml);
    } else if (nvml.status().code() != absl::StatusCode::kNotFound) {
      ringmaster::LogWarning(absl::StrCat("no GPU metrics: ", nvml.status().message()));
    }
  }
  ra::AgentMetrics metrics(inv->trainer_samples_per_second(), gpus.get());
  std::unique_ptr<ringmaster::trainer::MetricsServer> metrics_server;
  if (flags.count("--metrics-listen")) {
    absl::StatusOr<std::unique_ptr<ringmaster::trainer::MetricsServer>> server =
        ra::ServeAgentMetrics(flags["--metrics-listen"], &metrics, inv->node_name());
    if (!server.ok()) return Fail(absl::StrCat("--metrics-listen: ", server.status().message()));
    metrics_server = *std::move(server);
    agent.set_metrics(&metrics);
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ringmaster::LogInfo(absl::StrCat("node ", inv->node_name(), " (", inv->cpu_cores(),
                                   " CPU cores, ", inv->host_memory_total_bytes() >> 20,
                                   " MiB of memory, ", inv->gpus_size(), " GPU(s)), coordinator ",
                                   flags["--coordinator"],
                                   insecure_loopback ? " (plaintext)" : " (TLS)",
                                   join_token->has_value() ? " with a join token" : "",
                                   ", trainer ", trainer, ", work dir ", work_dir));
  agent.Run(&g_stop);
  ringmaster::LogInfo("stopped");
  return 0;
}
