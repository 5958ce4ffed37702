// ringmaster-agent: one per node. Registers the node with the coordinator, starts and supervises
// the trainer ranks it is told to run, and reports on them (see agent.h).
//
//   ringmaster-agent --coordinator HOST:PORT --trainer PATH --work-dir DIR [--name NAME]
//                    [--rack LABEL] [--address ADDR]... [--inventory-override GPUS]
//                    [--log-max-bytes N] [--log-keep N]
#include <signal.h>
#include <unistd.h>

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
#include "agent/agent.h"
#include "agent/grpc_coordinator_link.h"
#include "agent/inventory.h"
#include "agent/process_launcher.h"
#include "agent/rank_supervisor.h"
#include "common/file_util.h"
#include "common/log.h"

namespace ra = ringmaster::agent;

namespace {

constexpr char kUsage[] =
    "usage: ringmaster-agent --coordinator HOST:PORT --trainer PATH --work-dir DIR\n"
    "           [--name NAME] [--rack LABEL] [--address ADDR (repeatable)]\n"
    "           [--inventory-override 'COUNTxNAME:sm_XY:MEM[,...]' | none]\n"
    "           [--log-max-bytes N] [--log-keep N]\n";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

int Fail(const std::string& msg) {
  ringmaster::LogError(msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ringmaster::SetLogProgramName("ringmaster-agent");
  std::map<std::string, std::string> flags;
  std::vector<std::string> addresses;
  static const char* kKnown[] = {
      "--coordinator",        "--trainer",       "--work-dir", "--name", "--rack", "--address",
      "--inventory-override", "--log-max-bytes", "--log-keep"};
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--help" || f == "-h") {
      std::cout << kUsage;
      return 0;
    }
    std::string v;
    if (size_t eq = f.find('='); eq != std::string::npos) {
      v = f.substr(eq + 1);
      f = f.substr(0, eq);
    } else if (i + 1 < argc) {
      v = argv[++i];
    } else {
      return Fail(absl::StrCat(f, " needs a value\n", kUsage));
    }
    if (std::find(std::begin(kKnown), std::end(kKnown), f) == std::end(kKnown)) {
      return Fail(absl::StrCat("unknown argument '", f, "'\n", kUsage));
    }
    if (f == "--address") {
      addresses.push_back(v);
    } else {
      flags[f] = v;
    }
  }
  for (const char* required : {"--coordinator", "--trainer", "--work-dir"}) {
    if (!flags.count(required)) return Fail(absl::StrCat(required, " is required\n", kUsage));
  }
  std::error_code ec;
  const std::string trainer = std::filesystem::absolute(flags["--trainer"], ec).string();
  if (ec || ::access(trainer.c_str(), X_OK) != 0) {
    return Fail(absl::StrCat("--trainer ", flags["--trainer"], ": not an executable file"));
  }
  const std::string work_dir = std::filesystem::absolute(flags["--work-dir"], ec).string();
  if (absl::Status s = ringmaster::MakeDirs(work_dir); !s.ok()) return Fail(s.ToString());

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

  ra::SupervisorOptions sopts;
  sopts.trainer_path = trainer;
  sopts.work_dir = work_dir;
  sopts.cpu_cores = static_cast<int>(inv->cpu_cores());
  ra::ProcessLauncher launcher(lopts);
  ra::RankSupervisor ranks(sopts, &launcher, [](const std::string& name) {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
  ra::GrpcCoordinatorLink link(flags["--coordinator"]);
  ra::AgentOptions aopts;
  aopts.inventory = *inv;
  ra::Agent agent(aopts, &link, &ranks, [] { return absl::Now(); });

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ringmaster::LogInfo(absl::StrCat("node ", inv->node_name(), " (", inv->cpu_cores(),
                                   " CPU cores, ", inv->gpus_size(), " GPU(s)), coordinator ",
                                   flags["--coordinator"], ", trainer ", trainer, ", work dir ",
                                   work_dir));
  agent.Run(&g_stop);
  ringmaster::LogInfo("stopped");
  return 0;
}
