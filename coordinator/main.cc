// ringmaster-coordinator: the control plane's server (coordinator.proto, agent.proto).
//
//   ringmaster-coordinator --listen HOST:PORT --db PATH [--advertise HOST:PORT]   (--help: all)
//       [--lost-after 10s] [--last-call 5s] [--join-timeout 300s] [--master-port 29500]
//       [--stall-after 10s] [--metrics-listen HOST:PORT] [--forget-lost-after 24h]
//       (--tls-cert FILE --tls-key FILE [--tls-client-ca FILE] | --insecure-loopback)
//       [--join-token-file FILE] [--submit-token-file FILE] [--register-rate 5]
//       [--max-streams-per-peer 64]
//
// TLS with --tls-cert/--tls-key; --tls-client-ca also requires and verifies client certificates
// (mutual TLS). Plaintext only with --insecure-loopback and a loopback --listen. Tokens from the
// files, else $RINGMASTER_JOIN_TOKEN / $RINGMASTER_SUBMIT_TOKEN (docs/operations.md, Security).
// --advertise is the address ranks are told to reach it at (RINGMASTER_COORDINATOR); default:
// --listen.
// --stall-after: how long ranks may wait inside a collective that others have not entered before
// the job's status names them (docs/control-plane.md). --metrics-listen serves Prometheus'
// /metrics there (port 0: a free one, logged; docs/metrics.md); plaintext and unauthenticated, so
// a non-loopback HOST needs --metrics-insecure-public. Stops on SIGINT / SIGTERM.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/log_escape.h"
#include "coordinator/cluster/cluster.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/state/clock.h"
#include "coordinator/state/job_db.h"
#include "security/loopback.h"
#include "security/secret.h"
#include "security/tls_credentials.h"

namespace {

using ringmaster::LogError;
using ringmaster::LogInfo;
using ringmaster::LogWarning;

struct Flags {
  std::string listen;
  std::string db;
  std::string advertise;
  absl::Duration lost_after = absl::Seconds(10);
  absl::Duration forget_lost_after = absl::Hours(24);  // 0: lost nodes are never forgotten
  absl::Duration last_call = absl::Seconds(5);
  absl::Duration join_timeout = absl::Seconds(300);
  int master_port = 29500;
  absl::Duration stall_after = absl::Seconds(10);
  std::string metrics_listen;            // empty: no /metrics
  bool metrics_insecure_public = false;  // allows a non-loopback metrics_listen
  ringmaster::security::TlsOptions tls;
  bool insecure_loopback = false;
  bool bind_node_names = false;  // --bind-node-names-to-certs
  std::string node_cert_map;     // --node-cert-map FILE
  std::string join_token_file;
  std::string submit_token_file;
  double register_rate = 5;  // per peer host and second (burst 10x); 0: no limit
  int max_streams_per_peer = 64;
};

bool ParseDurationFlag(std::string_view name, const char* value, absl::Duration* out) {
  if (!absl::ParseDuration(value, out) || *out < absl::ZeroDuration()) {
    std::fprintf(stderr, "ringmaster-coordinator: %.*s: '%s' is not a duration like 10s\n",
                 static_cast<int>(name.size()), name.data(), value);
    return false;
  }
  return true;
}

// 0: parsed; otherwise the exit code (-1: --help or --version, exit 0).
int ParseFlags(int argc, char** argv, Flags* f) {
  ringmaster::FlagSet fs("ringmaster-coordinator",
                         "the control plane's server: jobs, nodes, rendezvous, plans");
  std::string lost_after = "10s", last_call = "5s", join_timeout = "300s", stall_after = "10s";
  std::string master_port = "29500", forget_lost_after = "24h";
  std::string register_rate = "5", max_streams = "64";
  fs.Value("--listen", "HOST:PORT", &f->listen, "required", "the gRPC address to serve on");
  fs.Value("--db", "PATH", &f->db, "required",
           "the SQLite job database (created when absent; survives restarts)");
  fs.Value("--advertise", "HOST:PORT", &f->advertise, "--listen",
           "the address ranks are told to reach the coordinator at (RINGMASTER_COORDINATOR)");
  fs.Value("--lost-after", "DURATION", &lost_after, lost_after,
           "a node silent this long is Lost and its ranks are rescheduled");
  fs.Value("--last-call", "DURATION", &last_call, last_call,
           "how long a rendezvous waits for late ranks once enough have joined");
  fs.Value("--join-timeout", "DURATION", &join_timeout, join_timeout,
           "how long a rendezvous waits for all ranks before the attempt fails");
  fs.Value("--master-port", "PORT", &master_port, master_port,
           "MASTER_PORT given to ranks (rank 0's rendezvous port)");
  fs.Value("--stall-after", "DURATION", &stall_after, stall_after,
           "ranks waiting this long in a collective others have not entered are named in\n"
           "the job's status (docs/control-plane.md)");
  fs.Value("--forget-lost-after", "DURATION", &forget_lost_after, forget_lost_after,
           "a Lost node no job holds is removed from the registry, the database and /metrics\n"
           "this long after it went silent (0: never)");
  fs.Value("--metrics-listen", "HOST:PORT", &f->metrics_listen, "none (no /metrics)",
           "serves Prometheus' /metrics there; port 0 picks a free one (logged)");
  fs.Value("--tls-cert", "FILE", &f->tls.cert_file, "none", "the server certificate (TLS)");
  fs.Value("--tls-key", "FILE", &f->tls.key_file, "none", "its private key");
  fs.Value("--tls-client-ca", "FILE", &f->tls.ca_file, "none (no client certificates)",
           "requires client certificates chaining to this CA (mutual TLS)");
  fs.Switch("--bind-node-names-to-certs", &f->bind_node_names,
            "with --tls-client-ca: an agent registers only under a node name its client\n"
            "certificate carries (subject CN or subjectAltName); PERMISSION_DENIED otherwise");
  fs.Value("--node-cert-map", "FILE", &f->node_cert_map, "none",
           "'NODE_NAME CERT_NAME' lines: certificates naming CERT_NAME may also register\n"
           "NODE_NAME (implies --bind-node-names-to-certs)");
  fs.Switch("--insecure-loopback", &f->insecure_loopback,
            "plaintext instead of TLS; only with a loopback --listen");
  fs.Switch("--metrics-insecure-public", &f->metrics_insecure_public,
            "allow a non-loopback --metrics-listen (plaintext, unauthenticated /metrics)");
  fs.Value("--join-token-file", "FILE", &f->join_token_file, "$RINGMASTER_JOIN_TOKEN, else none",
           "the token agents must present to register");
  fs.Value("--submit-token-file", "FILE", &f->submit_token_file,
           "$RINGMASTER_SUBMIT_TOKEN, else none",
           "the token the CLI must present to submit/cancel");
  fs.Value("--register-rate", "N", &register_rate, register_rate,
           "Registers a second per client host (bursts of 10 N); more are refused with\n"
           "RESOURCE_EXHAUSTED (0: no limit)");
  fs.Value("--max-streams-per-peer", "N", &max_streams, max_streams,
           "open WatchJob streams per client host, and Heartbeat streams still waiting for\n"
           "their first message (10 s); more are refused with RESOURCE_EXHAUSTED (0: no limit)");
  fs.SetNotes(
      "Either --tls-cert and --tls-key, or --insecure-loopback. Stops on SIGINT / SIGTERM.");
  if (std::optional<int> exit_code = fs.ParseOrExit(argc, argv)) return *exit_code == 0 ? -1 : 2;
  auto usage_error = [&](const std::string& msg) {
    std::fprintf(stderr, "ringmaster-coordinator: %s\n%s\n", msg.c_str(), fs.UsageHint().c_str());
    return 2;
  };
  if (!fs.positional().empty()) {
    return usage_error(absl::StrCat("unexpected argument '", fs.positional()[0], "'"));
  }
  if (!ParseDurationFlag("--lost-after", lost_after.c_str(), &f->lost_after) ||
      !ParseDurationFlag("--last-call", last_call.c_str(), &f->last_call) ||
      !ParseDurationFlag("--join-timeout", join_timeout.c_str(), &f->join_timeout) ||
      !ParseDurationFlag("--stall-after", stall_after.c_str(), &f->stall_after) ||
      !ParseDurationFlag("--forget-lost-after", forget_lost_after.c_str(), &f->forget_lost_after)) {
    return 2;
  }
  if (!absl::SimpleAtod(register_rate, &f->register_rate) || f->register_rate < 0 ||
      !absl::SimpleAtoi(max_streams, &f->max_streams_per_peer) || f->max_streams_per_peer < 0) {
    return usage_error("--register-rate and --max-streams-per-peer take a number >= 0");
  }
  if (!absl::SimpleAtoi(master_port, &f->master_port) || f->master_port <= 0 ||
      f->master_port >= 65536) {
    std::fprintf(stderr, "ringmaster-coordinator: --master-port: bad port '%s'\n",
                 master_port.c_str());
    return 2;
  }
  if (f->listen.empty() || f->db.empty()) return usage_error("--listen and --db are required");
  if ((f->bind_node_names || !f->node_cert_map.empty()) && f->tls.ca_file.empty()) {
    return usage_error(
        "--bind-node-names-to-certs and --node-cert-map need mutual TLS (--tls-client-ca): "
        "without client certificates there is no name to bind");
  }
  if (f->lost_after <= absl::ZeroDuration() || f->join_timeout <= absl::ZeroDuration() ||
      f->stall_after <= absl::ZeroDuration()) {
    std::fprintf(stderr,
                 "ringmaster-coordinator: --lost-after, --join-timeout and --stall-after must be "
                 "> 0\n");
    return 2;
  }
  if (!f->metrics_listen.empty() && f->metrics_listen.rfind(':') == std::string::npos) {
    std::fprintf(stderr, "ringmaster-coordinator: --metrics-listen: '%s' is not HOST:PORT\n",
                 f->metrics_listen.c_str());
    return 2;
  }
  // /metrics is plaintext and unauthenticated: beyond this machine only when asked for.
  if (!f->metrics_listen.empty() && !f->metrics_insecure_public &&
      !ringmaster::security::IsLoopbackAddress(f->metrics_listen)) {
    std::fprintf(stderr,
                 "ringmaster-coordinator: --metrics-listen %s: not a loopback address, and "
                 "/metrics is served in plaintext without authentication; listen on 127.0.0.1, "
                 "or add --metrics-insecure-public to serve it there anyway (and firewall it to "
                 "your Prometheus)\n",
                 f->metrics_listen.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace rc = ringmaster::coordinator;
  ringmaster::SetLogProgramName("ringmaster-coordinator");
  // Node names, job names and errors from the network reach this log: none may forge a line.
  ringmaster::SetLogEscapeControlCharacters(true);
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex deadlock detection on: a
  // third of the coordinator's time at 4096 nodes (coordinator/bench/bench_scale.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Flags flags;
  if (int rc = ParseFlags(argc, argv, &flags); rc != 0) return rc < 0 ? 0 : rc;

  // Signals are taken by sigwait() below; every thread started from here on inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Transport and tokens first: a coordinator that would run unsafely does not start at all.
  namespace sec = ringmaster::security;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      sec::ServerCredentialsFor(flags.listen, flags.tls, flags.insecure_loopback);
  if (!credentials.ok()) {
    LogError(std::string(credentials.status().message()));
    return 2;
  }
  absl::StatusOr<std::optional<std::string>> join_token =
      sec::ReadSecret("join token", flags.join_token_file, "RINGMASTER_JOIN_TOKEN");
  absl::StatusOr<std::optional<std::string>> submit_token =
      sec::ReadSecret("submit token", flags.submit_token_file, "RINGMASTER_SUBMIT_TOKEN");
  for (const auto* t : {&join_token, &submit_token}) {
    if (!t->ok()) {
      LogError(std::string(t->status().message()));
      return 2;
    }
  }
  if (!join_token->has_value() && !flags.insecure_loopback) {
    LogWarning(
        "no join token (--join-token-file, $RINGMASTER_JOIN_TOKEN): any client that "
        "reaches --listen may register as a node");
  }
  if (!submit_token->has_value() && !flags.insecure_loopback) {
    LogWarning(
        "no submit token (--submit-token-file, $RINGMASTER_SUBMIT_TOKEN): any client that "
        "reaches --listen may submit and cancel jobs");
  }
  const std::string transport =
      absl::StrCat(sec::DescribeServerTransport(flags.tls, flags.insecure_loopback),
                   ", join token ", join_token->has_value() ? "required" : "off", ", submit token ",
                   submit_token->has_value() ? "required" : "off",
                   flags.bind_node_names || !flags.node_cert_map.empty()
                       ? ", node names bound to client certificates"
                       : "");
  rc::ServerSecurity security{*std::move(credentials),
                              sec::TokenPolicy(*std::move(join_token), *std::move(submit_token))};
  security.limits.register_per_second = flags.register_rate;
  security.limits.register_burst = 10 * flags.register_rate;
  security.limits.streams_per_peer = flags.max_streams_per_peer;
  if (!flags.node_cert_map.empty()) {
    absl::StatusOr<rc::NodeCertBinding> map = rc::LoadNodeCertMap(flags.node_cert_map);
    if (!map.ok()) {
      LogError(absl::StrCat("--node-cert-map: ", map.status().message()));
      return 2;
    }
    security.node_certs = *std::move(map);
  }
  security.node_certs.enabled = flags.bind_node_names || !flags.node_cert_map.empty();

  rc::RealClock clock;
  absl::StatusOr<std::unique_ptr<rc::JobDb>> db = rc::JobDb::Open(flags.db, clock);
  if (!db.ok()) {
    LogError(db.status().ToString());
    return 1;
  }
  if ((*db)->created()) LogInfo(absl::StrCat("created a new coordinator database at ", flags.db));
  rc::ClusterOptions options;
  options.lost_after = flags.lost_after;
  options.forget_lost_after = flags.forget_lost_after;
  options.heartbeat_interval = std::max(flags.lost_after / 5, absl::Milliseconds(100));
  options.windows.last_call = flags.last_call;
  options.windows.join_timeout = flags.join_timeout;
  options.job.coordinator_address = flags.advertise.empty() ? flags.listen : flags.advertise;
  options.job.master_port = flags.master_port;
  options.job.stall_after = flags.stall_after;
  absl::StatusOr<std::unique_ptr<rc::Cluster>> cluster = rc::Cluster::Create(options, **db, clock);
  if (!cluster.ok()) {
    LogError(cluster.status().ToString());
    return 1;
  }
  std::unique_ptr<rc::MetricsServer> metrics;
  if (!flags.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<rc::MetricsServer>> m =
        rc::StartMetricsServer(flags.metrics_listen, **cluster);
    if (!m.ok()) {
      LogError(absl::StrCat("--metrics-listen: ", m.status().message()));
      return 1;
    }
    metrics = *std::move(m);
  }
  const absl::Duration tick = std::min(absl::Milliseconds(250), flags.lost_after / 4);
  absl::StatusOr<std::unique_ptr<rc::CoordinatorServer>> server =
      rc::CoordinatorServer::Start(flags.listen, **cluster, tick, std::move(security));
  if (!server.ok()) {
    LogError(server.status().ToString());
    return 1;
  }
  LogInfo(absl::StrCat("listening on ", flags.listen, " (port ", (*server)->port(), ", ", transport,
                       "), database ", flags.db, ", lost after ",
                       absl::FormatDuration(flags.lost_after)));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  LogInfo(absl::StrCat("signal ", sig, ": shutting down"));
  metrics.reset();
  (*server)->Shutdown();
  return 0;
}
