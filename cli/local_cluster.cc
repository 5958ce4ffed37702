#include "cli/local_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/process_launcher.h"
#include "cli/grpc_coordinator_client.h"
#include "cli/job_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "jobspec/default_job.h"
#include "jobspec/job_spec.h"
#include "jobspec/plan_vars.h"
#include "security/tls_credentials.h"
#include "trainer/data/sentiment_gen.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace ringmaster::cli {
namespace {

namespace fs = std::filesystem;

void Say(CliIo& io, const std::string& s) {
  const std::string line = absl::StrCat("ringmaster local: ", s, "\n");
  std::fwrite(line.data(), 1, line.size(), io.err);
}

// This program's path, for command lines a user can paste ("ringmaster" when it is unknown).
std::string SelfPath() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("ringmaster") : self.string();
}

std::map<std::string, std::string> OwnEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Waits for a child to end, up to `timeout`; false if it still runs.
bool WaitExit(agent::Launcher& launcher, int pid, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (!launcher.Poll(pid)) {
    if (absl::Now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

void Stop(agent::Launcher& launcher, int pid, absl::Duration grace) {
  if (launcher.Poll(pid)) return;
  (void)launcher.Signal(pid, SIGTERM);
  if (!WaitExit(launcher, pid, grace)) {
    (void)launcher.Signal(pid, SIGKILL);
    WaitExit(launcher, pid, absl::Seconds(10));
  }
}

}  // namespace

absl::StatusOr<std::string> OverrideDistributed(std::string_view yaml, std::optional<int> nodes,
                                                std::optional<int> procs_per_node) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) return absl::InvalidArgumentError("the job file is not a YAML mapping");
    YAML::Node dist = root["distributed"];
    if (dist && !dist.IsMap()) return absl::InvalidArgumentError("distributed: is not a mapping");
    if (nodes) root["distributed"]["nodes"] = std::to_string(*nodes);
    if (procs_per_node) root["distributed"]["procs_per_node"] = *procs_per_node;
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("job file: ", e.what()));
  }
}

std::vector<std::string> ReachCommands(const std::string& cli, const std::string& target,
                                       const std::string& job_id) {
  const std::string to = absl::StrCat(" --coordinator ", target, " --insecure-loopback");
  return {absl::StrCat(cli, " status ", job_id, to),
          absl::StrCat(cli, " logs ", job_id, " --rank 0", to)};
}

absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return absl::InternalError("cannot bind a loopback port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

std::string LastEvalSummary(const std::string& metrics_path) {
  absl::StatusOr<std::string> text = ReadFile(metrics_path, size_t{256} << 20);
  if (!text.ok()) return "";
  std::string summary;
  std::map<int64_t, std::string> by_step;  // each evaluation's summary, for the best model's
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (!j.is_object()) continue;
    const bool has_step = j.contains("step") && j["step"].is_number_integer();
    if (j.contains("best_model_step") && j["best_model_step"].is_number_integer()) {
      // train.load_best_model_at_end: the exported model is the best evaluation's.
      auto it = by_step.find(j["best_model_step"].get<int64_t>());
      if (it != by_step.end()) {
        summary = it->second;
        summary.insert(summary.size() - 1,
                       absl::StrCat(", the best by ", j.value("metric_for_best_model", "?")));
      }
      continue;
    }
    if (!j.contains("eval_loss") || !j["eval_loss"].is_number()) continue;
    const std::string step = has_step ? absl::StrCat("step ", j["step"].get<int64_t>()) : "";
    const double loss = j["eval_loss"].get<double>();
    if (j.contains("eval_accuracy") && j["eval_accuracy"].is_number()) {
      summary =
          absl::StrFormat("dev accuracy %.4f (eval loss %.4f%s)", j["eval_accuracy"].get<double>(),
                          loss, step.empty() ? "" : ", " + step);
    } else {
      summary = absl::StrFormat("eval loss %.4f%s", loss, step.empty() ? "" : " (" + step + ")");
    }
    if (has_step) by_step[j["step"].get<int64_t>()] = summary;
  }
  return summary;
}

LocalShape ShapeOf(const trainer::JobSpec& job, const LocalOptions& o) {
  LocalShape shape;
  const trainer::DistributedSpec& d = job.distributed;
  const std::string job_nodes = d.min_nodes == d.max_nodes
                                    ? absl::StrCat(d.min_nodes)
                                    : absl::StrCat(d.min_nodes, ":", d.max_nodes);
  // An elastic job gets its most nodes: the coordinator waits for no more.
  shape.nodes = o.nodes.value_or(d.max_nodes);
  if (o.nodes && job_nodes != absl::StrCat(*o.nodes)) {
    shape.overrides.push_back(
        absl::StrCat("--nodes ", *o.nodes, " overrides the job's distributed.nodes ", job_nodes));
  }
  shape.procs = o.procs_per_node ? absl::StrCat(*o.procs_per_node) : d.procs_per_node;
  if (o.procs_per_node && d.procs_per_node != shape.procs) {
    shape.overrides.push_back(absl::StrCat("--procs-per-node ", *o.procs_per_node,
                                           " overrides the job's distributed.procs_per_node ",
                                           d.procs_per_node));
  }
  if (const int procs = jobspec::ParseProcsPerNode(shape.procs).value_or(0); procs > 0) {
    shape.procs_estimate = procs;
  } else if (int gpus = 0;
             absl::SimpleAtoi(o.gpus.substr(0, o.gpus.find('x')), &gpus) && gpus > 0) {
    shape.procs_estimate = gpus;  // auto: one per GPU of --gpus "NxNAME:..."
  }
  return shape;
}

std::string LocalMetricsAddress(int base, int agent) {
  return absl::StrCat("127.0.0.1:", base + (agent < 0 ? 0 : 1 + agent));
}

absl::StatusOr<std::string> PrepareDemoJob(const std::string& root) {
  std::error_code ec;
  const fs::path base = (fs::absolute(root, ec) / "runs" / "demo").lexically_normal();
  if (ec) return absl::InvalidArgumentError(absl::StrCat(root, ": ", ec.message()));
  const fs::path data = base / "data";
  if (!fs::exists(data / "train.tsv") || !fs::exists(data / "dev.tsv") ||
      !fs::exists(data / "vocab.txt")) {
    // The same dataset `ringmaster-trainer train` generates for its embedded job.
    RM_RETURN_IF_ERROR(trainer::WriteSentimentDataset(data.string(), 42, 8000, 1000));
  }
  std::string yaml = trainer::DefaultDemoJobYaml();
  // Its paths are relative to the directory it runs in ("runs/demo/..."): make them absolute.
  yaml = absl::StrReplaceAll(yaml, {{" runs/demo", absl::StrCat(" ", base.string())}});
  const std::string path = (base / "job.yaml").string();
  RM_RETURN_IF_ERROR(WriteFileAtomic(path, yaml));
  return path;
}

int RunLocal(const LocalOptions& o, CliIo& io) {
  for (const auto& [what, path] : {std::pair{"trainer", o.trainer},
                                   {"coordinator", o.coordinator_bin},
                                   {"agent", o.agent_bin}}) {
    if (path.empty() || ::access(path.c_str(), X_OK) != 0) {
      Say(io, absl::StrCat("no ", what, " binary at '", path, "'"));
      return 2;
    }
  }
  absl::StatusOr<std::string> text = trainer::ReadJobFile(o.job_path);
  if (!text.ok()) {
    Say(io, std::string(text.status().message()));
    return 2;
  }
  // Spec errors name the user's file and line: check the file as written first.
  const fs::path job_abs = fs::absolute(o.job_path).lexically_normal();
  absl::StatusOr<trainer::JobSpec> spec =
      trainer::ParseJobSpec(*text, job_abs.filename().string(), job_abs.parent_path().string());
  if (!spec.ok()) {
    Say(io, std::string(spec.status().message()));
    return 2;
  }
  const LocalShape shape = ShapeOf(*spec, o);
  for (const std::string& line : shape.overrides) Say(io, line);
  if (o.metrics_port > 0 && o.metrics_port + shape.nodes > 65535) {
    Say(io, absl::StrCat("--metrics-port ", o.metrics_port, " + ", shape.nodes,
                         " nodes passes port 65535"));
    return 2;
  }
  absl::StatusOr<std::string> yaml = OverrideDistributed(*text, o.nodes, o.procs_per_node);
  if (!yaml.ok()) {
    Say(io, std::string(yaml.status().message()));
    return 2;
  }
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) {
    Say(io, std::string(port.status().message()));
    return 1;
  }
  std::string tmpl = (fs::temp_directory_path() / "ringmaster-local-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    Say(io, "cannot create a temporary directory");
    return 1;
  }
  const fs::path dir = tmpl;
  const std::string target = absl::StrCat("127.0.0.1:", *port);

  agent::ProcessLauncher launcher;
  std::map<std::string, std::string> env = OwnEnvironment();
  // Everything stays on 127.0.0.1 over plaintext (--insecure-loopback) without tokens: a token
  // from the caller's environment would make the local coordinator demand one nobody sends.
  for (const char* secret :
       {"RINGMASTER_JOIN_TOKEN", "RINGMASTER_SUBMIT_TOKEN", "RINGMASTER_TOKEN"}) {
    env.erase(secret);
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  env["OMP_NUM_THREADS"] = std::to_string(
      std::max(1u, cores / static_cast<unsigned>(shape.nodes * shape.procs_estimate)));

  int exit_code = 1;
  std::vector<int> agents;
  int coordinator = -1;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      security::ControlPlaneChannel(target, security::TlsOptions{}, /*insecure_loopback=*/true);
  if (!channel.ok()) {
    Say(io, std::string(channel.status().message()));
    return 1;
  }
  GrpcCoordinatorClient client(*std::move(channel), /*token=*/"");
  std::string job_id;
  auto shutdown = [&] {
    if (!job_id.empty()) {
      absl::StatusOr<v1::JobStatus> st = client.GetJob(job_id);
      if (st.ok() && !IsTerminal(st->phase())) (void)client.CancelJob(job_id, "ringmaster local");
    }
    for (int pid : agents) (void)launcher.Signal(pid, SIGTERM);
    for (int pid : agents) Stop(launcher, pid, absl::Seconds(40));
    if (coordinator > 0) Stop(launcher, coordinator, absl::Seconds(10));
  };

  agent::LaunchSpec cs;
  // Rank 0's rendezvous port: a free one, so that two local clusters do not collide.
  absl::StatusOr<int> master_port = FreeLoopbackPort();
  if (!master_port.ok()) {
    Say(io, std::string(master_port.status().message()));
    return 1;
  }
  cs.argv = {o.coordinator_bin,
             "--listen",
             target,
             "--db",
             (dir / "coordinator.db").string(),
             "--master-port",
             std::to_string(*master_port),
             "--last-call",
             "1s",
             "--insecure-loopback"};
  if (o.metrics_port > 0) {
    cs.argv.push_back("--metrics-listen");
    cs.argv.push_back(LocalMetricsAddress(o.metrics_port, -1));
  }
  cs.env = env;
  cs.log_path = (dir / "coordinator.log").string();
  absl::StatusOr<int> cpid = launcher.Start(cs);
  if (!cpid.ok()) {
    Say(io, std::string(cpid.status().message()));
    return 1;
  }
  coordinator = *cpid;
  Say(io, absl::StrCat("coordinator on ", target, " (logs and work dirs in ", dir.string(), ")"));
  if (o.metrics_port > 0) {
    Say(io, absl::StrCat("metrics: coordinator http://", LocalMetricsAddress(o.metrics_port, -1),
                         "/metrics, agents http://", LocalMetricsAddress(o.metrics_port, 0),
                         shape.nodes > 1 ? absl::StrCat("..", o.metrics_port + shape.nodes) : "",
                         "/metrics"));
  }
  if (!client.WaitForConnected(absl::Seconds(30)) || launcher.Poll(coordinator)) {
    Say(io, absl::StrCat("the coordinator did not come up; see ", cs.log_path));
    shutdown();
    return 1;
  }
  for (int i = 0; i < shape.nodes; ++i) {
    agent::LaunchSpec as;
    const std::string name = absl::StrCat("local-", i);
    as.argv = {o.agent_bin,          "--coordinator",        target,   "--trainer",    o.trainer,
               "--work-dir",         (dir / name).string(),  "--name", name,           "--address",
               "127.0.0.1",          "--inventory-override", o.gpus,   "--throughput", "off",
               "--insecure-loopback"};
    if (o.metrics_port > 0) {
      as.argv.push_back("--metrics-listen");
      as.argv.push_back(LocalMetricsAddress(o.metrics_port, i));
    }
    as.env = env;
    as.log_path = (dir / (name + ".log")).string();
    absl::StatusOr<int> apid = launcher.Start(as);
    if (!apid.ok()) {
      Say(io, std::string(apid.status().message()));
      shutdown();
      return 1;
    }
    agents.push_back(*apid);
  }
  // All agents registered before the job arrives, so the rendezvous sees them at once.
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (true) {
    absl::StatusOr<v1::ListNodesResponse> n = client.ListNodes();
    if (n.ok() && n->nodes_size() >= shape.nodes) break;
    if (absl::Now() >= until || io.interrupted()) {
      Say(io, absl::StrCat("agents did not register within 30 s; see ", dir.string()));
      shutdown();
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  absl::StatusOr<std::string> id = SubmitJobFile(client, o.job_path, *yaml, io);
  if (!id.ok()) {
    Say(io, absl::StrCat("submit: ", id.status().message()));
    shutdown();
    return 1;
  }
  job_id = *id;
  Say(io, absl::StrCat("job ", job_id, " on ", shape.nodes, " node(s) x ", shape.procs,
                       " process(es) per node",
                       shape.overrides.empty() ? " (the job's distributed settings)" : ""));
  // How to reach this cluster from another terminal, said once and kept beside its logs.
  const std::vector<std::string> reach = ReachCommands(SelfPath(), target, job_id);
  Say(io, "from another terminal, while it runs:");
  for (const std::string& line : reach) Say(io, absl::StrCat("  ", line));
  absl::Status readme = WriteFileAtomic(
      (dir / "README").string(),
      absl::StrCat("A `ringmaster local` cluster: coordinator on ", target, ", job ", job_id,
                   ".\nWhile it runs:\n  ", absl::StrJoin(reach, "\n  "), "\n"));
  if (!readme.ok()) Say(io, std::string(readme.message()));
  exit_code = FollowJob(client, job_id, io);
  shutdown();
  if (exit_code == 0) {
    std::string summary = LastEvalSummary(spec->output.dir + "/metrics.jsonl");
    Say(io, absl::StrCat(summary.empty() ? "" : summary + "; ", "model in ", spec->output.dir,
                         "/final"));
  }
  if (exit_code == 0 && !o.keep_dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  } else {
    Say(io, absl::StrCat("logs kept in ", dir.string()));
  }
  return exit_code;
}

}  // namespace ringmaster::cli
