#include "coordinator/bench/run_once.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/bench/coordinator_process.h"
#include "coordinator/bench/plan_check.h"
#include "coordinator/bench/sim_agents.h"
#include "coordinator/cluster/api_version.h"
#include "grpcpp/grpcpp.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"

namespace ringmaster::bench_scale {

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

}  // namespace ringmaster::bench_scale
