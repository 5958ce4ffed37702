// ringmaster: the command line for a Ringmaster cluster.
//
//   ringmaster --coordinator HOST:PORT submit JOB.yaml [--follow]
//   ringmaster --coordinator HOST:PORT status JOB | list | cancel JOB | nodes
//   ringmaster --coordinator HOST:PORT logs JOB --rank N [--bytes B]   (the end of a rank's log)
//   ringmaster local [JOB.yaml] [--nodes N] [--procs-per-node M] [--trainer PATH] [--keep]
//       (--nodes / --procs-per-node override the job's distributed.nodes / procs_per_node)
//       [--metrics-port BASE]   (/metrics: coordinator on BASE, agent i on BASE+1+i)
//       [--gpus SPEC]           (each agent's GPU inventory, as agent --inventory-override)
//       without JOB.yaml: the embedded demo job, its data generated under ./runs/demo
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
#include "security/secret.h"
#include "security/tls_credentials.h"

namespace rc = ringmaster::cli;
namespace fs = std::filesystem;

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  ringmaster [--coordinator HOST:PORT] submit JOB.yaml [--follow]\n"
    "  ringmaster [--coordinator HOST:PORT] status JOB\n"
    "  ringmaster [--coordinator HOST:PORT] list\n"
    "  ringmaster [--coordinator HOST:PORT] cancel JOB\n"
    "  ringmaster [--coordinator HOST:PORT] nodes\n"
    "  ringmaster [--coordinator HOST:PORT] logs JOB --rank N [--bytes B]\n"
    "  ringmaster local [JOB.yaml] [--nodes N] [--procs-per-node M] [--trainer PATH]\n"
    "             (default: the job's distributed.nodes and procs_per_node)\n"
    "             [--coordinator-binary PATH] [--agent-binary PATH] [--keep]\n"
    "             [--metrics-port BASE]   (/metrics: coordinator BASE, agent i BASE+1+i)\n"
    "             [--gpus 'NxNAME:sm_XY:MEMGiB']   (each agent's GPUs; default none)\n"
    "      without JOB.yaml: the embedded demo job (data generated under ./runs/demo)\n"
    "--coordinator defaults to $RINGMASTER_COORDINATOR, else 127.0.0.1:7070.\n"
    "global security flags (before the command):\n"
    "  --tls-ca FILE        CA the coordinator's certificate chains to ($RINGMASTER_TLS_CA;\n"
    "                       default: the system's roots)\n"
    "  --tls-cert FILE --tls-key FILE   client certificate for mutual TLS\n"
    "                       ($RINGMASTER_TLS_CERT, $RINGMASTER_TLS_KEY)\n"
    "  --tls-server-name NAME   the name in the coordinator's certificate, when --coordinator\n"
    "                       reaches it by another name or an address\n"
    "                       ($RINGMASTER_TLS_SERVER_NAME)\n"
    "  --token-file FILE    the submit token ($RINGMASTER_TOKEN_FILE, or the token itself in\n"
    "                       $RINGMASTER_TOKEN)\n"
    "  --insecure-loopback  plaintext, only to a loopback coordinator\n"
    "                       ($RINGMASTER_INSECURE_LOOPBACK=1)\n";

std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted.store(true); }

int Usage(const std::string& why) {
  std::fprintf(stderr, "ringmaster: %s\n%s", why.c_str(), kUsage);
  return 2;
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
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string coordinator;
  if (const char* e = std::getenv("RINGMASTER_COORDINATOR")) coordinator = e;
  if (coordinator.empty()) coordinator = "127.0.0.1:7070";
  ringmaster::security::TlsOptions tls;
  tls.ca_file = EnvOr("RINGMASTER_TLS_CA", "");
  tls.cert_file = EnvOr("RINGMASTER_TLS_CERT", "");
  tls.key_file = EnvOr("RINGMASTER_TLS_KEY", "");
  tls.server_name = EnvOr("RINGMASTER_TLS_SERVER_NAME", "");
  bool insecure_loopback = EnvOr("RINGMASTER_INSECURE_LOOPBACK", "0") == "1";
  std::string token_file = EnvOr("RINGMASTER_TOKEN_FILE", "");
  // Global flags come before the command: "--flag VALUE" or "--flag=VALUE".
  const std::map<std::string, std::string*> global_valued = {
      {"--coordinator", &coordinator},         {"--tls-ca", &tls.ca_file},
      {"--tls-cert", &tls.cert_file},          {"--tls-key", &tls.key_file},
      {"--tls-server-name", &tls.server_name}, {"--token-file", &token_file}};
  size_t i = 0;
  while (i < args.size() && args[i].rfind("--", 0) == 0) {
    if (args[i] == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args[i] == "--insecure-loopback") {
      insecure_loopback = true;
      ++i;
      continue;
    }
    const size_t eq = args[i].find('=');
    auto flag = global_valued.find(args[i].substr(0, eq));
    if (flag == global_valued.end()) {
      return Usage(absl::StrCat("unknown argument '", args[i], "'"));
    }
    if (eq != std::string::npos) {
      *flag->second = args[i].substr(eq + 1);
      ++i;
    } else if (i + 1 < args.size()) {
      *flag->second = args[i + 1];
      i += 2;
    } else {
      return Usage(absl::StrCat(args[i], " needs a value"));
    }
  }
  if (i >= args.size()) return Usage("no command");
  const std::string cmd = args[i++];
  // The command's positional arguments and flags.
  std::vector<std::string> pos;
  std::map<std::string, std::string> flags;
  std::vector<std::string> switches;
  static const std::vector<std::string> kValued = {
      "--rank",           "--bytes",        "--nodes",
      "--procs-per-node", "--trainer",      "--coordinator-binary",
      "--agent-binary",   "--metrics-port", "--gpus"};
  static const std::vector<std::string> kSwitches = {"--follow", "--keep"};
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      pos.push_back(a);
    } else if (std::find(kSwitches.begin(), kSwitches.end(), a) != kSwitches.end()) {
      switches.push_back(a);
    } else if (std::find(kValued.begin(), kValued.end(), a) != kValued.end()) {
      if (i + 1 >= args.size()) return Usage(absl::StrCat(a, " needs a value"));
      flags[a] = args[++i];
    } else {
      return Usage(absl::StrCat("unknown argument '", a, "'"));
    }
  }
  auto has = [&](const char* s) {
    return std::find(switches.begin(), switches.end(), s) != switches.end();
  };

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
    o.keep_dir = has("--keep");
    if (flags.count("--gpus")) o.gpus = flags["--gpus"];
    if (flags.count("--metrics-port") &&
        (!absl::SimpleAtoi(flags["--metrics-port"], &o.metrics_port) || o.metrics_port < 0 ||
         o.metrics_port > 65535)) {
      return Usage("--metrics-port needs a port BASE with BASE + nodes <= 65535 (0: off)");
    }
    return rc::RunLocal(o, io);
  }

  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      ringmaster::security::ControlPlaneChannel(coordinator, tls, insecure_loopback);
  if (!channel.ok()) {
    std::fprintf(stderr, "ringmaster: %s\n", std::string(channel.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::optional<std::string>> token =
      ringmaster::security::ReadSecret("submit token", token_file, "RINGMASTER_TOKEN");
  if (!token.ok()) {
    std::fprintf(stderr, "ringmaster: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  rc::GrpcCoordinatorClient client(*std::move(channel), token->value_or(std::string()));
  if (cmd == "submit") {
    if (pos.size() != 1) return Usage("submit needs one JOB.yaml");
    return rc::CmdSubmit(client, pos[0], has("--follow"), io);
  }
  if (cmd == "status" || cmd == "cancel") {
    if (pos.size() != 1) return Usage(absl::StrCat(cmd, " needs a job id"));
    return cmd == "status" ? rc::CmdStatus(client, pos[0], io) : rc::CmdCancel(client, pos[0], io);
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
  return Usage(absl::StrCat("unknown command '", cmd, "'"));
}
