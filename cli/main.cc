// ringmaster: the command line for a Ringmaster cluster.
//
//   ringmaster submit JOB.yaml [--follow] | status JOB | list | cancel JOB | nodes
//   ringmaster nodes forget NAME                (frees the name of a node whose agent is away)
//   ringmaster logs JOB --rank N [--bytes B]   (the end of a rank's log)
//   ringmaster local [JOB.yaml] [--nodes N] [--procs-per-node M] ...
//   ringmaster --help | COMMAND --help | --version
// Flags anywhere, --flag VALUE or --flag=VALUE (common/flags.h); DefineFlags lists them all.
//
// --coordinator defaults to $RINGMASTER_COORDINATOR, else 127.0.0.1:7070.
//
// Security (docs/operations.md): TLS by default, trusting --tls-ca ($RINGMASTER_TLS_CA; default:
// the system's roots), with --tls-cert/--tls-key ($RINGMASTER_TLS_CERT/_KEY) for mutual TLS.
// Plaintext only with --insecure-loopback ($RINGMASTER_INSECURE_LOOPBACK=1) to a loopback
// coordinator. The submit token from --token-file ($RINGMASTER_TOKEN_FILE), else
// $RINGMASTER_TOKEN.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/grpc_coordinator_client.h"
#include "cli/local_cluster.h"
#include "common/flags.h"
#include "security/secret.h"
#include "security/tls_credentials.h"

namespace rc = ringmaster::cli;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted.store(true); }

// The flags of every command, in one parser (common/flags.h): --help lists them all.
struct Options {
  std::string coordinator;
  ringmaster::security::TlsOptions tls;
  bool insecure_loopback = false;
  std::string token_file;
  bool follow = false;
  bool keep = false;
};

void DefineFlags(ringmaster::FlagSet& f, Options* o) {
  f.AddCommand("submit", "JOB.yaml", "Submits a job to the coordinator and prints its id.");
  f.AddCommand("status", "JOB", "One job's state, progress and ranks.");
  f.AddCommand("list", "", "Every job the coordinator knows.");
  f.AddCommand("cancel", "JOB", "Stops a job's ranks; it ends Cancelled.");
  f.AddCommand("nodes", "[forget NAME]",
               "The agents registered with the coordinator and their GPUs.",
               "nodes forget NAME: frees the name of a node whose agent is away, so that a new\n"
               "agent may register it. A known name is otherwise taken back only with the node\n"
               "secret its agent keeps in its work dir (lost with that dir). Needs the submit\n"
               "token; refused while the node's agent is connected or a job holds it.");
  f.AddCommand("logs", "JOB --rank N", "The end of one rank's log, fetched from its node.");
  f.AddCommand("local", "[JOB.yaml]",
               "Runs a job on this machine: a coordinator, agents and trainers, then stops them.",
               "Without JOB.yaml: the embedded demo job (data generated under ./runs/demo).");
  f.Switch("--follow", &o->follow, "print the job's progress until it ends", {"submit"});
  f.Value("--rank", "N", nullptr, "required", "the rank whose log to show", {"logs"});
  f.Value("--bytes", "B", nullptr, "65536 (the coordinator's)",
          "at most this many bytes from the log's end, 1..1048576", {"logs"});
  f.Value("--nodes", "N", nullptr, "the job's distributed.nodes",
          "agents to start (overrides the job's value)", {"local"});
  f.Value("--procs-per-node", "M", nullptr, "the job's distributed.procs_per_node",
          "trainer ranks per agent (overrides the job's value)", {"local"});
  f.Value("--trainer", "PATH", nullptr, "ringmaster-trainer beside this binary",
          "the trainer binary", {"local"});
  f.Value("--coordinator-binary", "PATH", nullptr, "ringmaster-coordinator beside this binary",
          "the coordinator binary", {"local"});
  f.Value("--agent-binary", "PATH", nullptr, "ringmaster-agent beside this binary",
          "the agent binary", {"local"});
  f.Switch("--keep", &o->keep, "keep the cluster's scratch directory (database, logs)", {"local"});
  f.Value("--metrics-port", "BASE", nullptr, "0 (no /metrics)",
          "/metrics: the coordinator on BASE, agent i on BASE+1+i", {"local"});
  f.Value("--gpus", "'NxNAME:sm_XY:MEMGiB'", nullptr, "none",
          "each agent's GPU inventory, as ringmaster-agent --inventory-override", {"local"});
  f.Value("--coordinator", "HOST:PORT", &o->coordinator,
          "$RINGMASTER_COORDINATOR, else 127.0.0.1:7070", "the coordinator to talk to");
  f.Value("--tls-ca", "FILE", &o->tls.ca_file, "$RINGMASTER_TLS_CA, else the system's roots",
          "CA the coordinator's certificate chains to");
  f.Value("--tls-cert", "FILE", &o->tls.cert_file, "$RINGMASTER_TLS_CERT, else none",
          "client certificate for mutual TLS (with --tls-key)");
  f.Value("--tls-key", "FILE", &o->tls.key_file, "$RINGMASTER_TLS_KEY, else none",
          "the client certificate's private key");
  f.Value("--tls-server-name", "NAME", &o->tls.server_name,
          "$RINGMASTER_TLS_SERVER_NAME, else the --coordinator host",
          "the name in the coordinator's certificate, when --coordinator reaches it by\n"
          "another name or an address");
  f.Value("--token-file", "FILE", &o->token_file,
          "$RINGMASTER_TOKEN_FILE, else the token itself in $RINGMASTER_TOKEN, else none",
          "the submit token");
  f.Switch("--insecure-loopback", &o->insecure_loopback,
           "plaintext, only to a loopback coordinator ($RINGMASTER_INSECURE_LOOPBACK=1)");
  f.SetNotes(
      "TLS by default (docs/operations.md, Security). `ringmaster local` starts its own\n"
      "coordinator on loopback and ignores the global flags.");
}

// The directory of this binary.
fs::path SelfDir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : p.parent_path();
}

// `name` next to this binary (an install), else in the build tree's sibling folder.
std::string FindSibling(const std::string& name, const std::string& build_folder) {
  const fs::path self = SelfDir();
  for (const fs::path& p : {self / name, self.parent_path() / build_folder / name}) {
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

bool ParsePositive(const std::string& s, int* v) { return absl::SimpleAtoi(s, v) && *v > 0; }

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC's own log lines (an OpenSSL "wrong version number") would precede the explanation
  // this binary prints (common/connect_error.h); GRPC_VERBOSITY=ERROR brings them back.
  ::setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  Options opts;
  opts.coordinator = EnvOr("RINGMASTER_COORDINATOR", "127.0.0.1:7070");
  opts.tls.ca_file = EnvOr("RINGMASTER_TLS_CA", "");
  opts.tls.cert_file = EnvOr("RINGMASTER_TLS_CERT", "");
  opts.tls.key_file = EnvOr("RINGMASTER_TLS_KEY", "");
  opts.tls.server_name = EnvOr("RINGMASTER_TLS_SERVER_NAME", "");
  opts.insecure_loopback = EnvOr("RINGMASTER_INSECURE_LOOPBACK", "0") == "1";
  opts.token_file = EnvOr("RINGMASTER_TOKEN_FILE", "");
  ringmaster::FlagSet fs("ringmaster", "the command line for a Ringmaster cluster");
  DefineFlags(fs, &opts);
  if (std::optional<int> exit_code = fs.ParseOrExit(argc, argv)) return *exit_code;
  auto Usage = [&](const std::string& why) {
    std::fprintf(stderr, "ringmaster %s: %s\n%s\n", fs.command().c_str(), why.c_str(),
                 fs.UsageHint().c_str());
    return 2;
  };
  const std::string cmd = fs.command();
  const std::vector<std::string>& pos = fs.positional();
  std::map<std::string, std::string> flags;
  for (const char* name : {"--rank", "--bytes", "--nodes", "--procs-per-node", "--trainer",
                           "--coordinator-binary", "--agent-binary", "--metrics-port", "--gpus"}) {
    if (std::optional<std::string> v = fs.value(name)) flags[name] = *v;
  }
  const std::string& coordinator = opts.coordinator;
  const bool insecure_loopback = opts.insecure_loopback;

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  rc::CliIo io;
  io.tty = ::isatty(1) != 0;
  io.interrupted = [] { return g_interrupted.load(); };

  if (cmd == "local") {
    if (pos.size() > 1) return Usage("local takes at most one JOB.yaml");
    rc::LocalOptions o;
    if (pos.empty()) {
      absl::StatusOr<std::string> demo = rc::PrepareDemoJob(".");
      if (!demo.ok()) {
        std::fprintf(stderr, "ringmaster local: %s\n",
                     std::string(demo.status().message()).c_str());
        return 1;
      }
      std::fprintf(stderr, "ringmaster local: the embedded demo job, %s\n", demo->c_str());
      o.job_path = *demo;
    } else {
      o.job_path = pos[0];
    }
    // Unset: the job's own distributed.nodes / procs_per_node.
    for (const auto& [flag, out] :
         {std::pair{"--nodes", &o.nodes}, std::pair{"--procs-per-node", &o.procs_per_node}}) {
      if (!flags.count(flag)) continue;
      int v = 0;
      if (!ParsePositive(flags[flag], &v)) {
        return Usage("--nodes and --procs-per-node need positive integers");
      }
      *out = v;
    }
    o.trainer = flags.count("--trainer") ? flags["--trainer"]
                                         : FindSibling("ringmaster-trainer", "trainer");
    o.coordinator_bin = flags.count("--coordinator-binary")
                            ? flags["--coordinator-binary"]
                            : FindSibling("ringmaster-coordinator", "coordinator");
    o.agent_bin = flags.count("--agent-binary") ? flags["--agent-binary"]
                                                : FindSibling("ringmaster-agent", "agent");
    std::error_code ec;
    o.trainer = fs::absolute(o.trainer, ec).string();
    o.keep_dir = opts.keep;
    if (flags.count("--gpus")) o.gpus = flags["--gpus"];
    if (flags.count("--metrics-port") &&
        (!absl::SimpleAtoi(flags["--metrics-port"], &o.metrics_port) || o.metrics_port < 0 ||
         o.metrics_port > 65535)) {
      return Usage("--metrics-port needs a port BASE with BASE + nodes <= 65535 (0: off)");
    }
    return rc::RunLocal(o, io);
  }

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ringmaster::security::ControlPlaneChannel(coordinator, opts.tls, insecure_loopback);
  if (!channel.ok()) {
    std::fprintf(stderr, "ringmaster: %s\n", std::string(channel.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::optional<std::string>> token =
      ringmaster::security::ReadSecret("submit token", opts.token_file, "RINGMASTER_TOKEN");
  if (!token.ok()) {
    std::fprintf(stderr, "ringmaster: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  rc::GrpcCoordinatorClient client(*std::move(channel), token->value_or(std::string()));
  client.set_target({coordinator, insecure_loopback, "--coordinator (or $RINGMASTER_COORDINATOR)"});
  if (cmd == "submit") {
    if (pos.size() != 1) return Usage("submit needs one JOB.yaml");
    return rc::CmdSubmit(client, pos[0], opts.follow, io);
  }
  if (cmd == "status" || cmd == "cancel") {
    if (pos.size() != 1) return Usage(absl::StrCat(cmd, " needs a job id"));
    return cmd == "status" ? rc::CmdStatus(client, pos[0], io) : rc::CmdCancel(client, pos[0], io);
  }
  if (cmd == "nodes" && !pos.empty()) {
    if (pos.size() != 2 || pos[0] != "forget")
      return Usage("nodes takes no arguments, or forget NAME");
    return rc::CmdNodesForget(client, pos[1], io);
  }
  if (cmd == "list" || cmd == "nodes") {
    if (!pos.empty()) return Usage(absl::StrCat(cmd, " takes no arguments"));
    return cmd == "list" ? rc::CmdList(client, io) : rc::CmdNodes(client, io);
  }
  if (cmd == "logs") {
    int rank = 0;
    if (pos.size() != 1 || !flags.count("--rank") || !absl::SimpleAtoi(flags["--rank"], &rank) ||
        rank < 0) {
      return Usage("logs needs a job id and --rank N");
    }
    int bytes = 0;
    if (flags.count("--bytes") &&
        (!absl::SimpleAtoi(flags["--bytes"], &bytes) || bytes < 1 || bytes > (1 << 20))) {
      return Usage("--bytes needs an integer in 1..1048576");
    }
    return rc::CmdLogs(client, pos[0], rank, static_cast<uint32_t>(bytes), io);
  }
  return Usage(absl::StrCat("unknown command '", cmd, "'"));  // FlagSet knows them all
}
