// bench_scale: the control plane at scale (issue #5, docs/scale.md).
//
//   bench_scale [--nodes 64,512,4096] [--gpus 8] [--coordinator PATH] [--register-window 64]
//               [--connections 0] [--nodes-per-rack 32] [--no-ack] [--timeout 180]
//               [--keep] [--perf-record FILE]
//
// For each node count N it starts the real ringmaster-coordinator as a child process (its own
// temporary SQLite database, a free port chosen by the coordinator, --last-call 1s,
// --lost-after 600s), then simulates N agents in this process over real gRPC with the callback
// API: Register with an inventory of `--gpus` A100s (sm_80, 80 GiB) per node, hostnames spread
// over racks, then the bidirectional Heartbeat stream with the agent's first report. Once the
// coordinator has taken every node's first report (ListNodes: last heartbeat after
// registration), it submits a job with `distributed.nodes: N` and `procs_per_node: gpus` and
// measures the time from the start of SubmitJob until every simulated agent has received its
// StartRanks on its stream. Every StartRanks is checked: distinct global ranks covering
// 0..world-1 exactly once, WORLD_SIZE = N x gpus, contiguous ranks per node in topology order
// (rack, hostname), local ranks and GPU indices 0..gpus-1, RANK/LOCAL_RANK/GROUP_RANK, and
// MASTER_ADDR naming rank 0's node.
//
// The coordinator runs in its own process so that its CPU time (/proc/PID/stat, user + system)
// and peak RSS (VmHWM) are its own, not the simulated agents'. Both processes share the machine's
// cores, so the wall-clock times include the agents' side of every RPC.
//
// Each agent has its own channel (a separate TCP connection, like a real cluster) unless
// --connections K > 0 spreads them over K channels. The process's soft fd limit is raised to its
// hard limit (the coordinator inherits it): 4096 agents need about 4096 fds on each side.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "coordinator/cluster/api_version.h"
#include "grpcpp/grpcpp.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace {

namespace v1 = ringmaster::v1;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "bench_scale: %s\n", msg.c_str());
  std::exit(1);
}

struct Flags {
  std::vector<int> nodes = {64, 512, 4096};
  int gpus = 8;
  std::string coordinator;
  int register_window = 64;
  int connections = 0;  // 0: one channel (TCP connection) per agent
  int nodes_per_rack = 32;
  bool ack = true;
  double timeout_s = 180;
  bool keep = false;
  std::string perf_record;  // perf record -g the coordinator from submit to all assigned
};

// ---- the coordinator process

struct ProcSample {
  double cpu_s = 0;  // user + system, all threads
  long hwm_kib = 0;  // VmHWM
  long rss_kib = 0;  // VmRSS
  int threads = 0;
};

ProcSample SampleProc(pid_t pid) {
  ProcSample s;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  // Fields after the command name, which is in parentheses and may contain spaces.
  const size_t close = line.rfind(')');
  if (close != std::string::npos) {
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    // f[0] is field 3 (state); utime is field 14, stime field 15.
    long utime = 0, stime = 0;
    if (f.size() > 13 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime)) {
      s.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  while (std::getline(status, line)) {
    auto field = [&](std::string_view name, long* out) {
      if (line.rfind(name, 0) != 0) return;
      std::string v(line.substr(name.size()));
      v.erase(std::remove_if(v.begin(), v.end(), [](char c) { return !std::isdigit(c); }), v.end());
      (void)absl::SimpleAtoi(v, out);
    };
    long threads = 0;
    field("VmHWM:", &s.hwm_kib);
    field("VmRSS:", &s.rss_kib);
    field("Threads:", &threads);
    if (threads > 0) s.threads = static_cast<int>(threads);
  }
  return s;
}

class CoordinatorProcess {
 public:
  CoordinatorProcess(const std::string& binary, const std::string& dir) : dir_(dir) {
    log_path_ = dir + "/coordinator.log";
    const std::string db = dir + "/jobs.db";
    pid_ = fork();
    if (pid_ < 0) Die("fork failed");
    if (pid_ == 0) {
      int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--db", db.c_str(),
            "--last-call", "1s", "--lost-after", "600s", "--join-timeout", "600s",
            "--insecure-loopback",  // plaintext, as the simulated agents speak, on 127.0.0.1 only
            static_cast<char*>(nullptr));
      std::perror("exec ringmaster-coordinator");
      _exit(127);
    }
    // The coordinator logs "listening on 127.0.0.1:0 (port N, ...": the port it bound.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      std::ifstream log(log_path_);
      std::string line;
      while (std::getline(log, line)) {
        const size_t at = line.find("(port ");
        if (line.find("listening on") != std::string::npos && at != std::string::npos) {
          const size_t end = line.find(',', at);
          if (absl::SimpleAtoi(line.substr(at + 6, end - at - 6), &port_)) return;
        }
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        Die("ringmaster-coordinator exited at startup; see " + log_path_);
      }
      usleep(20000);
    }
    Die("ringmaster-coordinator did not report its port; see " + log_path_);
  }
  ~CoordinatorProcess() { Stop(); }

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& log_path() const { return log_path_; }

  // SIGTERM, then SIGKILL after 30 s; returns the rusage of the child.
  std::optional<rusage> Stop() {
    if (pid_ <= 0) return std::nullopt;
    kill(pid_, SIGTERM);
    rusage ru{};
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (true) {
      pid_t r = wait4(pid_, &status, WNOHANG, &ru);
      if (r == pid_) break;
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        wait4(pid_, &status, 0, &ru);
        break;
      }
      usleep(20000);
    }
    pid_ = -1;
    return ru;
  }

 private:
  std::string dir_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// ---- simulated agents

struct Run;

struct SimAgent {
  int index = 0;
  v1::NodeInventory inventory;
  std::string node_id;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  // Register
  grpc::ClientContext register_ctx;
  v1::RegisterRequest register_request;
  v1::RegisterResponse register_response;
  // What arrived (written by the stream's callbacks before `Run::assigned` counts it).
  std::optional<v1::StartRanks> start;
  uint64_t start_command_id = 0;
  Clock::time_point start_at;
  int start_messages = 0;
  std::string error;
};

class HeartbeatStream;

struct Run {
  int n = 0;
  Flags flags;
  std::vector<std::unique_ptr<SimAgent>> agents;
  std::vector<std::unique_ptr<HeartbeatStream>> streams;  // by agent index
  std::atomic<int> next_register{0};

  std::mutex mu;
  std::condition_variable cv;
  int registered = 0;  // Register returned (ok or not)
  int register_failed = 0;
  int first_written = 0;  // the first report reached the wire
  int assigned = 0;       // StartRanks received
  int streams_started = 0;
  int streams_done = 0;
  int streams_failed = 0;  // ended with an error before StartRanks
  Clock::time_point last_assigned;
  Clock::time_point first_assigned = Clock::time_point::max();

  void Count(int Run::*counter) {
    std::lock_guard<std::mutex> l(mu);
    ++(this->*counter);
    cv.notify_all();
  }
  // Waits until pred() holds or the deadline passes; false on timeout.
  template <typename Pred>
  bool WaitUntil(Clock::time_point deadline, Pred pred) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_until(l, deadline, pred);
  }
  void StartRegister(int i);
};

class HeartbeatStream final
    : public grpc::ClientBidiReactor<v1::AgentMessage, v1::CoordinatorMessage> {
 public:
  HeartbeatStream(Run* run, SimAgent* agent) : run_(run), agent_(agent) {}

  void Start() {
    agent_->stub->async()->Heartbeat(&ctx_, this);
    v1::AgentMessage first;
    first.set_node_id(agent_->node_id);
    first.set_node_secret(agent_->register_response.node_secret());
    first.set_seq(++seq_);
    const absl::Time now = absl::Now();
    first.mutable_sent_at()->set_seconds(absl::ToUnixSeconds(now));
    first.mutable_sent_at()->set_nanos(static_cast<int32_t>(
        absl::ToInt64Nanoseconds(now - absl::FromUnixSeconds(absl::ToUnixSeconds(now)))));
    Send(std::move(first));
    StartRead(&in_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override {
    bool first = false;
    v1::AgentMessage* next = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      first = !first_done_;
      first_done_ = true;
      writing_.pop_front();
      if (ok && !writing_.empty()) next = &writing_.front();
    }
    if (first) run_->Count(&Run::first_written);
    if (next != nullptr) StartWrite(next);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (in_.has_start_ranks()) {
      const auto now = Clock::now();
      const uint64_t id = in_.command_id();
      ++agent_->start_messages;
      if (!agent_->start) {
        agent_->start = std::move(*in_.mutable_start_ranks());
        agent_->start_command_id = id;
        agent_->start_at = now;
        {
          std::lock_guard<std::mutex> l(run_->mu);
          ++run_->assigned;
          run_->last_assigned = std::max(run_->last_assigned, now);
          run_->first_assigned = std::min(run_->first_assigned, now);
          run_->cv.notify_all();
        }
      }
      if (run_->flags.ack) {
        // What the real agent does next: acknowledge the command it carried out.
        v1::AgentMessage ack;
        ack.set_node_id(agent_->node_id);
        ack.set_seq(++seq_);
        ack.add_acked_command_ids(id);
        Send(std::move(ack));
      }
    }
    in_.Clear();
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> l(run_->mu);
    if (!s.ok() && !agent_->start && s.error_code() != grpc::StatusCode::CANCELLED) {
      agent_->error = absl::StrCat("heartbeat stream: ", s.error_message());
      ++run_->streams_failed;
    }
    ++run_->streams_done;
    run_->cv.notify_all();
  }

 private:
  void Send(v1::AgentMessage m) {
    v1::AgentMessage* start = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      writing_.push_back(std::move(m));
      if (writing_.size() == 1) start = &writing_.front();
    }
    if (start != nullptr) StartWrite(start);
  }

  Run* run_;
  SimAgent* agent_;
  grpc::ClientContext ctx_;
  v1::CoordinatorMessage in_;
  std::mutex mu_;
  std::deque<v1::AgentMessage> writing_;  // front: the write in flight
  bool first_done_ = false;
  uint64_t seq_ = 0;
};

void Run::StartRegister(int i) {
  SimAgent* a = agents[static_cast<size_t>(i)].get();
  a->register_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  a->register_ctx.set_wait_for_ready(true);
  a->stub->async()->Register(&a->register_ctx, &a->register_request, &a->register_response,
                             [this, a](grpc::Status s) {
                               bool ok = s.ok();
                               if (ok) {
                                 a->node_id = a->register_response.node_id();
                                 {
                                   std::lock_guard<std::mutex> l(mu);
                                   ++streams_started;
                                 }
                                 streams[static_cast<size_t>(a->index)]->Start();
                               } else {
                                 a->error = absl::StrCat("register: ", s.error_message());
                               }
                               {
                                 std::lock_guard<std::mutex> l(mu);
                                 ++registered;
                                 if (!ok) ++register_failed;
                                 cv.notify_all();
                               }
                               const int next = next_register.fetch_add(1);
                               if (next < n) StartRegister(next);
                             });
}

// Node i of n: racks of `per_rack` nodes, "gpu-r017-n05" style names, 10.R.N.1 addresses.
v1::NodeInventory MakeInventory(int i, int gpus, int per_rack) {
  const int rack = i / per_rack, slot = i % per_rack;
  v1::NodeInventory inv;
  const std::string host = absl::StrFormat("gpu-r%03d-n%02d.dc1.example", rack, slot);
  inv.set_node_name(host);
  inv.set_hostname(host);
  inv.add_addresses(absl::StrFormat("10.%d.%d.%d", 1 + rack / 250, rack % 250, 10 + slot));
  inv.set_rack(absl::StrFormat("rack-%03d", rack));
  inv.set_cpu_cores(128);
  for (int g = 0; g < gpus; ++g) {
    v1::GpuInfo* gpu = inv.add_gpus();
    gpu->set_index(static_cast<uint32_t>(g));
    gpu->set_name("NVIDIA A100-SXM4-80GB");
    gpu->set_memory_bytes(uint64_t{80} << 30);
    gpu->set_compute_capability_major(8);
    gpu->set_compute_capability_minor(0);
    gpu->set_tensor_cores(true);
    gpu->set_uuid(absl::StrFormat("GPU-%08x-%04x-4000-8000-%012x", i, g, i * 64 + g));
  }
  return inv;
}

std::string JobYaml(int n, int gpus) {
  return absl::StrCat(
      "name: scale-", n, "x", gpus,
      "\nmodel:\n  init_from: models/bert-base-uncased\ndata:\n  train: data/train.tsv\n"
      "train:\n  device: cuda\n  global_batch_size: ",
      n * gpus, "\n  micro_batch_size: 1\noutput:\n  dir: runs/scale\ndistributed:\n  nodes: ", n,
      "\n  procs_per_node: ", gpus, "\n");
}

// ---- correctness of the plan as the agents received it

std::string GetEnv(const google::protobuf::Map<std::string, std::string>& env,
                   const std::string& k) {
  auto it = env.find(k);
  return it == env.end() ? std::string("<unset>") : it->second;
}

// Empty when every check passes; otherwise the first problems found.
std::vector<std::string> Verify(const Run& run, const std::string& job_id, int64_t generation) {
  std::vector<std::string> errors;
  auto fail = [&](std::string e) {
    if (errors.size() < 20) errors.push_back(std::move(e));
  };
  const int g = run.flags.gpus;
  const int world = run.n * g;
  // Topology order the planner promises: rack, hostname, node name, node id.
  std::vector<const SimAgent*> order;
  for (const auto& a : run.agents) order.push_back(a.get());
  std::sort(order.begin(), order.end(), [](const SimAgent* x, const SimAgent* y) {
    return std::tie(x->inventory.rack(), x->inventory.hostname(), x->inventory.node_name(),
                    x->node_id) < std::tie(y->inventory.rack(), y->inventory.hostname(),
                                           y->inventory.node_name(), y->node_id);
  });
  std::vector<int> seen(static_cast<size_t>(world), 0);
  const std::string master_addr = order.front()->inventory.addresses(0);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const SimAgent& a = *order[pos];
    const std::string who = absl::StrCat(a.inventory.node_name(), " (", a.node_id, ")");
    if (!a.start) {
      fail(absl::StrCat(who, ": no StartRanks"));
      continue;
    }
    const v1::StartRanks& s = *a.start;
    if (a.start_messages != 1) fail(absl::StrCat(who, ": ", a.start_messages, " StartRanks"));
    if (s.job_id() != job_id) fail(absl::StrCat(who, ": job ", s.job_id()));
    if (s.generation() != generation) fail(absl::StrCat(who, ": generation ", s.generation()));
    if (static_cast<int>(s.world_size()) != world) {
      fail(absl::StrCat(who, ": world_size ", s.world_size()));
    }
    if (GetEnv(s.common_env(), "WORLD_SIZE") != std::to_string(world)) {
      fail(absl::StrCat(who, ": WORLD_SIZE ", GetEnv(s.common_env(), "WORLD_SIZE")));
    }
    if (GetEnv(s.common_env(), "MASTER_ADDR") != master_addr) {
      fail(absl::StrCat(who, ": MASTER_ADDR ", GetEnv(s.common_env(), "MASTER_ADDR"), ", expected ",
                        master_addr));
    }
    if (s.ranks_size() != g) {
      fail(absl::StrCat(who, ": ", s.ranks_size(), " ranks"));
      continue;
    }
    const int first = static_cast<int>(s.ranks(0).global_rank());
    if (first != static_cast<int>(pos) * g) {
      fail(absl::StrCat(who, ": first rank ", first, ", expected ", pos * g,
                        " (topology order: rack, hostname)"));
    }
    for (int lr = 0; lr < g; ++lr) {
      const v1::RankLaunch& r = s.ranks(lr);
      const int gr = static_cast<int>(r.global_rank());
      if (gr < 0 || gr >= world) {
        fail(absl::StrCat(who, ": global rank ", gr, " out of range"));
        continue;
      }
      ++seen[static_cast<size_t>(gr)];
      if (gr != first + lr) fail(absl::StrCat(who, ": ranks not contiguous at ", gr));
      if (static_cast<int>(r.local_rank()) != lr) {
        fail(absl::StrCat(who, ": local rank ", r.local_rank(), " at ", lr));
      }
      if (r.gpu_index() != lr) fail(absl::StrCat(who, ": gpu_index ", r.gpu_index()));
      if (GetEnv(r.env(), "RANK") != std::to_string(gr) ||
          GetEnv(r.env(), "LOCAL_RANK") != std::to_string(lr) ||
          GetEnv(r.env(), "GROUP_RANK") != std::to_string(pos) ||
          GetEnv(r.env(), "LOCAL_WORLD_SIZE") != std::to_string(g)) {
        fail(absl::StrCat(who, ": env of rank ", gr, " RANK=", GetEnv(r.env(), "RANK"),
                          " LOCAL_RANK=", GetEnv(r.env(), "LOCAL_RANK"),
                          " GROUP_RANK=", GetEnv(r.env(), "GROUP_RANK")));
      }
      if (GetEnv(r.env(), "RINGMASTER_PRECISION") != "bf16") {
        fail(absl::StrCat(who, ": RINGMASTER_PRECISION ", GetEnv(r.env(), "RINGMASTER_PRECISION")));
      }
      if (r.micro_batch_weight() != 1.0) {
        fail(absl::StrCat(who, ": weight ", r.micro_batch_weight()));
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (seen[static_cast<size_t>(r)] != 1) {
      fail(absl::StrCat("global rank ", r, " assigned ", seen[static_cast<size_t>(r)], " times"));
    }
  }
  return errors;
}

// "2024-05-01T12:34:56.789Z INFO ..." lines of the coordinator log containing `needle`: the
// time of the first one.
std::optional<absl::Time> LogTime(const std::string& path, const std::string& needle) {
  std::ifstream log(path);
  std::string line;
  while (std::getline(log, line)) {
    if (line.find(needle) == std::string::npos) continue;
    absl::Time t;
    std::string err;
    if (absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", line.substr(0, line.find(' ')), &t, &err)) {
      return t;
    }
  }
  return std::nullopt;
}

struct Result {
  int nodes = 0;
  int ranks = 0;
  double register_s = 0;       // first Register sent .. coordinator has every first report
  double register_rpcs_s = 0;  // first Register sent .. last Register answered
  double register_cpu_s = 0;
  double submit_rpc_s = 0;      // SubmitJob call
  double first_assigned_s = 0;  // submit .. first StartRanks received
  double all_assigned_s = 0;    // submit .. every StartRanks received
  double coord_launch_s = -1;   // submit .. coordinator logged "running" (from its log, ms)
  double assign_cpu_s = 0;      // coordinator CPU from submit to all assigned
  double get_job_s = 0;         // submit .. a GetJob sent after all were assigned returned
  double total_cpu_s = 0;       // coordinator CPU for the whole run, startup included
  long hwm_mib = 0;
  int threads = 0;
  bool verified = false;
  std::vector<std::string> errors;
};

Result RunOnce(const Flags& flags, int n, const std::string& tmp_root) {
  Result res;
  res.nodes = n;
  res.ranks = n * flags.gpus;
  const std::string dir = absl::StrCat(tmp_root, "/n", n);
  std::filesystem::create_directories(dir);
  CoordinatorProcess coord(flags.coordinator, dir);
  const std::string target = absl::StrCat("127.0.0.1:", coord.port());
  std::fprintf(stderr, "[%d nodes] coordinator pid %d on %s, log %s\n", n, coord.pid(),
               target.c_str(), coord.log_path().c_str());

  grpc::ChannelArguments control_args;
  control_args.SetMaxReceiveMessageSize(256 << 20);
  control_args.SetInt("grpc.use_local_subchannel_pool", 1);
  auto control =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), control_args);
  auto coordinator_stub = v1::Coordinator::NewStub(control);

  Run run;
  run.n = n;
  run.flags = flags;
  const int channels = flags.connections > 0 ? std::min(flags.connections, n) : n;
  std::vector<std::shared_ptr<grpc::Channel>> pool;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    // Without a local pool, channels with equal arguments share one subchannel (one TCP
    // connection); each simulated agent should have its own, as on a real cluster.
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    args.SetInt("ringmaster.bench_channel", c);
    pool.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  // Registration order is shuffled so that the planner's topology sort has work to do.
  std::vector<int> inv_of(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) inv_of[static_cast<size_t>(i)] = i;
  std::mt19937 rng(12345);
  std::shuffle(inv_of.begin(), inv_of.end(), rng);
  for (int i = 0; i < n; ++i) {
    auto a = std::make_unique<SimAgent>();
    a->index = i;
    a->inventory = MakeInventory(inv_of[static_cast<size_t>(i)], flags.gpus, flags.nodes_per_rack);
    a->channel = pool[static_cast<size_t>(i % channels)];
    a->stub = v1::AgentService::NewStub(a->channel);
    a->register_request.mutable_agent_version()->set_major(ringmaster::coordinator::kApiMajor);
    a->register_request.mutable_agent_version()->set_minor(ringmaster::coordinator::kApiMinor);
    a->register_request.mutable_agent_version()->set_build("bench_scale simulated agent");
    *a->register_request.mutable_inventory() = a->inventory;
    run.agents.push_back(std::move(a));
  }
  for (int i = 0; i < n; ++i) {
    run.streams.push_back(std::make_unique<HeartbeatStream>(&run, run.agents[i].get()));
  }

  const ProcSample before_register = SampleProc(coord.pid());
  const auto t_register = Clock::now();
  const int window = std::min(flags.register_window, n);
  run.next_register = window;
  for (int i = 0; i < window; ++i) run.StartRegister(i);
  const auto deadline = t_register + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(flags.timeout_s));
  if (!run.WaitUntil(deadline, [&] { return run.registered == n; })) {
    // Register calls still in flight reference `run`: nothing to unwind safely.
    Die(absl::StrCat(n, " nodes: only ", run.registered, " of ", n, " registered within ",
                     flags.timeout_s, " s"));
  }
  // Ends every stream (the reactors must outlive their calls).
  auto teardown = [&run] {
    for (auto& s : run.streams) s->Cancel();
    if (!run.WaitUntil(Clock::now() + std::chrono::seconds(60),
                       [&] { return run.streams_done == run.streams_started; })) {
      Die("heartbeat streams did not end after cancel");
    }
  };
  res.register_rpcs_s = Seconds(Clock::now() - t_register);
  if (run.register_failed > 0) {
    for (const auto& a : run.agents) {
      if (!a->error.empty()) {
        res.errors.push_back(absl::StrCat(a->inventory.node_name(), ": ", a->error));
        break;
      }
    }
  }
  if (!run.WaitUntil(deadline, [&] { return run.first_written == n - run.register_failed; })) {
    res.errors.push_back(absl::StrCat("only ", run.first_written, " first reports sent"));
  }
  // The coordinator has attached a node's stream once it has processed its first report, which
  // sets last_heartbeat_at after registered_at.
  int ready = 0;
  while (Clock::now() < deadline) {
    // Every page (ListNodes pages its answer, at most 1000 nodes each).
    v1::ListNodesResponse nodes;
    v1::ListNodesRequest req;
    req.set_page_size(1000);
    do {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::ListNodesResponse page;
      grpc::Status st = coordinator_stub->ListNodes(&ctx, req, &page);
      if (!st.ok()) Die("ListNodes: " + st.error_message());
      for (v1::NodeInfo& ni : *page.mutable_nodes()) *nodes.add_nodes() = std::move(ni);
      req.set_page_token(page.next_page_token());
    } while (!req.page_token().empty());
    ready = 0;
    for (const v1::NodeInfo& ni : nodes.nodes()) {
      const auto& r = ni.registered_at();
      const auto& h = ni.last_heartbeat_at();
      if (ni.state() == v1::NODE_STATE_READY &&
          std::make_pair(h.seconds(), h.nanos()) > std::make_pair(r.seconds(), r.nanos())) {
        ++ready;
      }
    }
    if (ready == n) break;
    usleep(10000);
  }
  res.register_s = Seconds(Clock::now() - t_register);
  const ProcSample after_register = SampleProc(coord.pid());
  res.register_cpu_s = after_register.cpu_s - before_register.cpu_s;
  if (ready != n) {
    res.errors.push_back(absl::StrCat("only ", ready, " of ", n, " nodes ready before submit"));
    teardown();
    return res;
  }

  // Optional profile of the coordinator over the submit phase.
  pid_t perf = -1;
  if (!flags.perf_record.empty()) {
    perf = fork();
    if (perf == 0) {
      const std::string pid = std::to_string(coord.pid());
      const std::string out = absl::StrCat(flags.perf_record, ".", n);
      // RINGMASTER_BENCH_PERF_CALLGRAPH=dwarf for stacks through code without frame pointers.
      const char* cg = std::getenv("RINGMASTER_BENCH_PERF_CALLGRAPH");
      execlp("perf", "perf", "record", "-q", "--call-graph", cg != nullptr ? cg : "fp", "-F", "999",
             "-p", pid.c_str(), "-o", out.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    usleep(500000);  // perf attaches
  }

  // ---- the measured part: submit until every rank is assigned
  v1::SubmitJobRequest submit;
  submit.mutable_client_version()->set_major(ringmaster::coordinator::kApiMajor);
  submit.mutable_client_version()->set_minor(ringmaster::coordinator::kApiMinor);
  submit.set_job_yaml(JobYaml(n, flags.gpus));
  submit.set_base_dir(dir);
  submit.set_source("scale.yaml");
  submit.set_request_id(absl::StrCat("bench-scale-", n));
  v1::SubmitJobResponse submitted;
  const ProcSample before_submit = SampleProc(coord.pid());
  const absl::Time wall_submit = absl::Now();
  const auto t_submit = Clock::now();
  grpc::Status st;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    st = coordinator_stub->SubmitJob(&ctx, submit, &submitted);
  }
  res.submit_rpc_s = Seconds(Clock::now() - t_submit);
  if (!st.ok()) {
    res.errors.push_back("SubmitJob: " + st.error_message());
    teardown();
    return res;
  }
  const auto assign_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(flags.timeout_s));
  if (!run.WaitUntil(assign_deadline, [&] { return run.assigned == n; })) {
    res.errors.push_back(absl::StrCat("only ", run.assigned, " of ", n, " nodes got StartRanks"));
  }
  const ProcSample after_assign = SampleProc(coord.pid());
  {
    std::lock_guard<std::mutex> l(run.mu);
    if (run.assigned > 0) {
      res.all_assigned_s = Seconds(run.last_assigned - t_submit);
      res.first_assigned_s = Seconds(run.first_assigned - t_submit);
    }
  }
  res.assign_cpu_s = after_assign.cpu_s - before_submit.cpu_s;
  if (perf > 0) {
    kill(perf, SIGINT);
    int status = 0;
    waitpid(perf, &status, 0);
  }

  // The job as the coordinator reports it.
  v1::JobStatus status;
  {
    // Waits behind every event queued on the coordinator's lock (the agents' acks): the time
    // it returns says when the coordinator answers again after the launch.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(flags.timeout_s * 1000)));
    v1::GetJobRequest get;
    get.set_job_id(submitted.job_id());
    st = coordinator_stub->GetJob(&ctx, get, &status);
    res.get_job_s = Seconds(Clock::now() - t_submit);
  }
  if (!st.ok()) {
    res.errors.push_back("GetJob: " + st.error_message());
  } else {
    if (status.phase() != v1::JOB_PHASE_RUNNING) {
      res.errors.push_back(
          absl::StrCat("job phase ", v1::JobPhase_Name(status.phase()), ": ", status.error()));
    }
    if (static_cast<int>(status.world_size()) != res.ranks ||
        static_cast<int>(status.num_nodes()) != n) {
      res.errors.push_back(absl::StrCat("job status: world ", status.world_size(), " on ",
                                        status.num_nodes(), " nodes"));
    }
  }
  std::vector<std::string> errors = Verify(run, submitted.job_id(), status.generation());
  res.verified = errors.empty() && res.errors.empty();
  res.errors.insert(res.errors.end(), errors.begin(), errors.end());

  const ProcSample end = SampleProc(coord.pid());
  res.hwm_mib = end.hwm_kib / 1024;
  res.threads = end.threads;
  res.total_cpu_s = end.cpu_s;
  if (auto launched = LogTime(coord.log_path(), " running ")) {
    res.coord_launch_s = absl::ToDoubleSeconds(*launched - wall_submit);
  }

  // Tear down: end every stream, then stop the coordinator.
  teardown();
  if (std::optional<rusage> ru = coord.Stop()) {
    res.total_cpu_s =
        std::max(res.total_cpu_s, static_cast<double>(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) +
                                      1e-6 * (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec));
    res.hwm_mib = std::max(res.hwm_mib, ru->ru_maxrss / 1024);
  }
  return res;
}

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

void Usage() {
  std::fputs(
      "usage: bench_scale [--nodes 64,512,4096] [--gpus 8] [--coordinator PATH]\n"
      "         [--register-window 64] [--connections 0] [--nodes-per-rack 32] [--no-ack]\n"
      "         [--timeout 180] [--keep] [--perf-record FILE]\n",
      stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  flags.coordinator = SelfDir() + "/ringmaster-coordinator";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](int* out) {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, out)) Die(absl::StrCat(std::string(a), ": not a number: ", v));
    };
    if (a == "--nodes") {
      flags.nodes.clear();
      for (absl::string_view s : absl::StrSplit(value(), ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(s, &v) || v < 1) Die(absl::StrCat("--nodes: bad count ", s));
        flags.nodes.push_back(v);
      }
    } else if (a == "--gpus") {
      number(&flags.gpus);
    } else if (a == "--coordinator") {
      flags.coordinator = value();
    } else if (a == "--register-window") {
      number(&flags.register_window);
    } else if (a == "--connections") {
      number(&flags.connections);
    } else if (a == "--nodes-per-rack") {
      number(&flags.nodes_per_rack);
    } else if (a == "--no-ack") {
      flags.ack = false;
    } else if (a == "--timeout") {
      if (!absl::SimpleAtod(value(), &flags.timeout_s)) Die("--timeout: not a number");
    } else if (a == "--keep") {
      flags.keep = true;
    } else if (a == "--perf-record") {
      flags.perf_record = value();
    } else {
      Usage();
      return 2;
    }
  }
  if (flags.gpus < 1 || flags.register_window < 1 || flags.nodes_per_rack < 1) {
    Die("--gpus, --register-window and --nodes-per-rack must be >= 1");
  }
  if (access(flags.coordinator.c_str(), X_OK) != 0) {
    Die("no ringmaster-coordinator at " + flags.coordinator + " (use --coordinator PATH)");
  }

  // Every agent's connection is one fd here and one in the coordinator (which inherits this
  // limit); raise the soft limit to the hard one.
  rlimit fds{};
  getrlimit(RLIMIT_NOFILE, &fds);
  const rlim_t soft_before = fds.rlim_cur;
  fds.rlim_cur = fds.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &fds) != 0) Die("setrlimit(RLIMIT_NOFILE) failed");
  const int max_nodes = *std::max_element(flags.nodes.begin(), flags.nodes.end());
  std::fprintf(stderr, "bench_scale: fd limit %llu -> %llu (soft -> hard)\n",
               static_cast<unsigned long long>(soft_before),
               static_cast<unsigned long long>(fds.rlim_cur));
  if (fds.rlim_cur != RLIM_INFINITY && static_cast<long long>(fds.rlim_cur) < max_nodes + 256) {
    Die(absl::StrCat("fd limit ", fds.rlim_cur, " is too low for ", max_nodes, " agents"));
  }
  signal(SIGPIPE, SIG_IGN);

  char tmpl[] = "/tmp/bench_scale.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string tmp_root = tmpl;

  std::vector<Result> results;
  bool all_ok = true;
  for (int n : flags.nodes) {
    Result r = RunOnce(flags, n, tmp_root);
    std::fprintf(stderr,
                 "[%d nodes] registered in %.3f s; submit -> all %d ranks assigned %.3f s "
                 "(coordinator CPU %.3f s), peak RSS %ld MiB, %d threads: %s\n",
                 n, r.register_s, r.ranks, r.all_assigned_s, r.assign_cpu_s, r.hwm_mib, r.threads,
                 r.verified ? "verified" : "FAILED");
    for (const std::string& e : r.errors) std::fprintf(stderr, "  error: %s\n", e.c_str());
    all_ok = all_ok && r.verified;
    results.push_back(std::move(r));
  }
  if (!flags.keep) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_root, ec);
  } else {
    std::fprintf(stderr, "bench_scale: kept %s\n", tmp_root.c_str());
  }

  std::printf(
      "| nodes x GPUs | ranks | register all (s) | coord. CPU, register (s) | SubmitJob RPC (s) "
      "| coord. planned+queued (s) | first StartRanks (s) | submit -> all ranks assigned (s) "
      "| coord. CPU, submit -> assigned (s) | GetJob answered (s) | coord. CPU total (s) "
      "| coord. peak RSS (MiB) | coord. threads | checks |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    std::printf(
        "| %d x %d | %d | %.3f | %.2f | %.3f | %s | %.3f | **%.3f** | %.2f | %.3f | %.2f | %ld "
        "| %d | %s |\n",
        r.nodes, flags.gpus, r.ranks, r.register_s, r.register_cpu_s, r.submit_rpc_s,
        r.coord_launch_s < 0 ? "?" : absl::StrFormat("%.3f", r.coord_launch_s).c_str(),
        r.first_assigned_s, r.all_assigned_s, r.assign_cpu_s, r.get_job_s, r.total_cpu_s, r.hwm_mib,
        r.threads, r.verified ? "pass" : "FAIL");
  }
  return all_ok ? 0 : 1;
}
