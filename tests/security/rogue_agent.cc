// A hostile insider for the security tests (issue #20): a client that holds the join token (and,
// under mutual TLS, a client certificate) but is not the agent of the node it names. It speaks
// AgentService directly, the way any program with the join token can.
//
//   rogue_agent heartbeat --node-id ID [--secret S] [--hold SECONDS] [--repeat N]
//       opens a Heartbeat stream for node ID and keeps it alive with empty reports (N times in
//       a row while refused);
//   rogue_agent register --name NAME --address ADDR [--previous-node-id ID] [--hold SECONDS]
//       registers NAME from ADDR (claiming node ID, as a returning agent does, but without its
//       secret) and, with --hold, opens the stream the registration allows;
//   rogue_agent forge-logs --name NAME --address ADDR --hold SECONDS [--ids N]
//       registers NAME (a node of its own) and, for --hold seconds, answers every SendLogs
//       command id 1..N (default 2000) every 20 ms with a forged log line carrying terminal
//       escapes ("FORGED"): a node that learnt the global command counter;
//   rogue_agent get-logs --job ID --rank N
//       GetLogs with the submit token (RINGMASTER_TOKEN_FILE), any uint32 rank; prints
//       "accepted: <bytes> bytes" or the refusal;
//   rogue_agent register --name NAME --address ADDR --repeat N
//       registers NAME-0 .. NAME-(N-1), each with the largest inventory the caps allow;
//   rogue_agent submit --job FILE [--request-id-bytes N] [--base-dir DIR | --base-dir-bytes N]
//       submits FILE with an oversized or malformed field (submit token from
//       RINGMASTER_TOKEN_FILE);
//   rogue_agent register --name NAME --address ADDR --gpu-name-bytes N
//       registers NAME with one GPU whose name is N bytes (issue #31);
//   rogue_agent stale-flood --name NAME --address ADDR --job ID --reports N [--marker-job ID2]
//       registers NAME, opens its stream and reports N ranks of job ID running, each with a new
//       generation (1000 a message); then one of ID2, whose StopRanks, coming after every
//       StopRanks the flood caused, ends the count. Prints "stop_ranks for ID: K";
//   rogue_agent idle-streams --method heartbeat|watch --count N [--job ID] [--hold SECONDS]
//       opens N streams that never send (heartbeat) or watch job ID, one after the other (a
//       watch counts as open once its first status arrived); prints "open: K refused: R
//       (CODE...)", "holding" while it holds them --hold seconds, then for heartbeat streams
//       waits for each to end and prints "ended: CODE..." (a held idle stream ends at the
//       coordinator's first-message deadline);
//   rogue_agent calls --method register|list-nodes --repeat N [--token T | --token none]
//       N calls in a row with the join token, T, or no token; prints "unauthenticated: K of N"
//       and exits 0 when every one was refused with UNAUTHENTICATED, else 2.
//
// Connection: RINGMASTER_COORDINATOR, RINGMASTER_TLS_CA/_CERT/_KEY or
// RINGMASTER_INSECURE_LOOPBACK=1 (as the CLI), the join token from RINGMASTER_JOIN_TOKEN_FILE.
// Prints "accepted: ..." and exits 0 when the stream stayed open for --hold seconds (or the
// registration or submission succeeded), "refused: CODE: message" and exits 2 when the
// coordinator refused, 1 on a usage or set-up error. Every command the stream received is
// printed as "command: KIND".
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ringmaster/v1/agent.grpc.pb.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "security/call_auth.h"
#include "security/secret.h"
#include "security/tls_credentials.h"

namespace {

namespace v1 = ringmaster::v1;
namespace sec = ringmaster::security;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

int Refused(const grpc::Status& s) {
  std::cout << "refused: " << s.error_code() << ": " << s.error_message() << std::endl;
  return 2;
}

// Holds a Heartbeat stream for `hold_s` seconds; 0 when it stayed open, else Refused's code.
int HoldStream(v1::AgentService::Stub& stub, const std::string& token, const std::string& node_id,
               const std::string& secret, double hold_s) {
  grpc::ClientContext ctx;
  sec::AttachToken(&ctx, token);
  auto stream = stub.Heartbeat(&ctx);
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    v1::CoordinatorMessage m;
    while (stream->Read(&m)) {
      std::cout << "command: "
                << v1::CoordinatorMessage::descriptor()->FindFieldByNumber(m.command_case())->name()
                << std::endl;
    }
    ended = true;
  });
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(hold_s * 1000));
  uint64_t seq = 0;
  auto next_report = std::chrono::steady_clock::now();
  while (!ended && std::chrono::steady_clock::now() < until) {
    if (std::chrono::steady_clock::now() >= next_report) {
      v1::AgentMessage m;
      m.set_node_id(node_id);
      m.set_seq(++seq);
      if (seq == 1) m.set_node_secret(secret);
      if (!stream->Write(m)) break;
      next_report += std::chrono::milliseconds(200);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const bool stayed_open = !ended;
  if (stayed_open) ctx.TryCancel();
  reader.join();
  grpc::Status s = stream->Finish();
  if (!stayed_open) return Refused(s);
  std::cout << "accepted: a heartbeat stream for " << node_id << " stayed open " << hold_s << " s"
            << std::endl;
  return 0;
}

// Registers a node and floods its stream with reports of an ended job's ranks, each with a new
// generation; counts the StopRanks the coordinator sends for them.
int StaleFlood(v1::AgentService::Stub& stub, const std::string& token,
               std::map<std::string, std::string>& flags) {
  v1::RegisterRequest req;
  req.mutable_agent_version()->set_major(1);
  req.mutable_inventory()->set_node_name(flags["--name"]);
  req.mutable_inventory()->add_addresses(flags["--address"]);
  req.mutable_inventory()->set_cpu_cores(1);
  v1::RegisterResponse reg;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    sec::AttachToken(&ctx, token);
    if (grpc::Status s = stub.Register(&ctx, req, &reg); !s.ok()) return Refused(s);
  }
  const std::string job = flags["--job"], marker = flags["--marker-job"];
  const int64_t reports = std::stoll(flags["--reports"]);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  sec::AttachToken(&ctx, token);
  auto stream = stub.Heartbeat(&ctx);
  std::atomic<int64_t> stops{0};
  std::atomic<bool> marker_seen{false};
  std::thread reader([&] {
    v1::CoordinatorMessage m;
    while (stream->Read(&m)) {
      if (!m.has_stop_ranks()) continue;
      if (m.stop_ranks().job_id() == job) ++stops;
      if (m.stop_ranks().job_id() == marker) {
        marker_seen = true;
        ctx.TryCancel();
      }
    }
  });
  uint64_t seq = 0;
  auto report = [&](v1::AgentMessage& m, const std::string& id, int64_t generation) {
    v1::RankProgress* r = m.add_ranks();
    r->set_job_id(id);
    r->set_generation(generation);
    r->set_global_rank(0);
    r->set_state(v1::RANK_PROCESS_STATE_RUNNING);
  };
  bool ok = true;
  for (int64_t g = 0; ok && g < reports;) {
    v1::AgentMessage m;
    m.set_node_id(reg.node_id());
    m.set_seq(++seq);
    if (seq == 1) m.set_node_secret(reg.node_secret());
    for (int i = 0; i < 1000 && g < reports; ++i) report(m, job, ++g);
    ok = stream->Write(m);
  }
  if (ok) {
    v1::AgentMessage m;
    m.set_node_id(reg.node_id());
    m.set_seq(++seq);
    report(m, marker, 0);
    ok = stream->Write(m);
  }
  reader.join();
  grpc::Status s = stream->Finish();
  std::cout << "stop_ranks for " << job << ": " << stops << " (" << reports << " reports)"
            << std::endl;
  if (!marker_seen) {
    std::cout << "no StopRanks for the marker job " << marker << std::endl;
    return Refused(s);
  }
  return 0;
}

// Opens `--count` idle streams one after the other; see the header.
int IdleStreams(const std::shared_ptr<grpc::Channel>& channel, const std::string& token,
                std::map<std::string, std::string>& flags, double hold_s) {
  const std::string method = flags["--method"];
  const int count = std::atoi(flags["--count"].c_str());
  if (count < 1 || (method != "heartbeat" && method != "watch")) {
    std::cerr << "rogue_agent idle-streams: needs --method heartbeat|watch and --count N >= 1\n";
    return 1;
  }
  auto agent = v1::AgentService::NewStub(channel);
  auto coordinator = v1::Coordinator::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>>>
      heartbeats;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::JobStatus>>> watches;
  int open = 0, refused = 0;
  std::string codes;
  for (int i = 0; i < count; ++i) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    sec::AttachToken(ctx.get(), token);
    if (method == "heartbeat") {
      heartbeats.push_back(agent->Heartbeat(ctx.get()));
      ++open;  // the coordinator's answer comes at its end (Finish below)
    } else {
      v1::WatchJobRequest req;
      req.set_job_id(flags["--job"]);
      auto reader = coordinator->WatchJob(ctx.get(), req);
      v1::JobStatus first;
      if (reader->Read(&first)) {
        ++open;
        watches.push_back(std::move(reader));
      } else {
        grpc::Status s = reader->Finish();
        ++refused;
        codes += " " + std::to_string(s.error_code());
      }
    }
    contexts.push_back(std::move(ctx));
  }
  std::cout << "open: " << open << " refused: " << refused << " (" << codes << " )" << std::endl;
  std::cout << "holding" << std::endl;
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(hold_s * 1000)));
  if (method == "heartbeat") {
    std::string ended;
    for (auto& h : heartbeats) ended += " " + std::to_string(h->Finish().error_code());
    std::cout << "ended:" << ended << std::endl;
  } else {
    for (auto& c : contexts) c->TryCancel();
    for (auto& w : watches) (void)w->Finish();
  }
  return 0;
}

// Registers `name` and holds its stream for `hold_s` seconds, sending with every report a forged
// answer to each SendLogs command id 1..`ids`. 0 when the stream stayed open.
int ForgeLogs(v1::AgentService::Stub& stub, const std::string& token, const std::string& name,
              const std::string& address, double hold_s, uint64_t ids) {
  v1::RegisterRequest req;
  req.mutable_agent_version()->set_major(1);
  req.mutable_inventory()->set_node_name(name);
  req.mutable_inventory()->add_addresses(address);
  req.mutable_inventory()->set_cpu_cores(1);
  grpc::ClientContext rctx;
  rctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  sec::AttachToken(&rctx, token);
  v1::RegisterResponse resp;
  if (grpc::Status s = stub.Register(&rctx, req, &resp); !s.ok()) return Refused(s);
  std::cout << "registered: " << resp.node_id() << std::endl;
  grpc::ClientContext ctx;
  sec::AttachToken(&ctx, token);
  auto stream = stub.Heartbeat(&ctx);
  std::atomic<bool> ended{false};
  std::thread reader([&] {
    v1::CoordinatorMessage m;
    while (stream->Read(&m)) {
    }
    ended = true;
  });
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(hold_s * 1000));
  uint64_t seq = 0, sent = 0;
  while (!ended && std::chrono::steady_clock::now() < until) {
    v1::AgentMessage m;
    m.set_node_id(resp.node_id());
    m.set_seq(++seq);
    if (seq == 1) m.set_node_secret(resp.node_secret());
    for (uint64_t id = 1; id <= ids; ++id) {
      v1::LogTail* t = m.add_logs();
      t->set_command_id(id);
      t->set_data("FORGED log line \x1b[31m\x1b]0;pwned\x07 from the rogue node\n");
    }
    if (!stream->Write(m)) break;
    ++sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const bool stayed_open = !ended;
  if (stayed_open) ctx.TryCancel();
  reader.join();
  grpc::Status s = stream->Finish();
  if (!stayed_open) return Refused(s);
  std::cout << "accepted: " << sent << " reports of " << ids << " forged log answers each"
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: rogue_agent heartbeat|register [--flag value]...\n";
    return 1;
  }
  const std::string mode = argv[1];
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  const double hold = flags.count("--hold") ? std::atof(flags["--hold"].c_str()) : 0;

  sec::TlsOptions tls;
  tls.ca_file = Env("RINGMASTER_TLS_CA");
  tls.cert_file = Env("RINGMASTER_TLS_CERT");
  tls.key_file = Env("RINGMASTER_TLS_KEY");
  auto channel = sec::ControlPlaneChannel(Env("RINGMASTER_COORDINATOR"), tls,
                                          Env("RINGMASTER_INSECURE_LOOPBACK") == "1");
  if (!channel.ok()) {
    std::cerr << channel.status() << "\n";
    return 1;
  }
  auto token = sec::ReadSecret("join token", Env("RINGMASTER_JOIN_TOKEN_FILE"), "");
  if (!token.ok()) {
    std::cerr << token.status() << "\n";
    return 1;
  }
  auto stub = v1::AgentService::NewStub(*channel);
  const std::string join = token->value_or("");

  if (mode == "heartbeat") {
    // --repeat N: N attempts in a row (a flood); the exit status is the last one's.
    const int repeat = flags.count("--repeat") ? std::atoi(flags["--repeat"].c_str()) : 1;
    int rc = 1;
    for (int i = 0; i < repeat; ++i) {
      rc = HoldStream(*stub, join, flags["--node-id"], flags["--secret"], hold);
      if (rc != 2) break;
    }
    return rc;
  }
  if (mode == "register" && flags.count("--repeat")) {
    // A flood: N registrations NAME-0 .. NAME-(N-1), each inventory as large as the caps allow
    // (hostname and rack 256 bytes, 16 addresses of 256), as fast as the coordinator answers.
    const int repeat = std::atoi(flags["--repeat"].c_str());
    int registered = 0;
    for (int i = 0; i < repeat; ++i) {
      v1::RegisterRequest req;
      req.mutable_agent_version()->set_major(1);
      v1::NodeInventory* inv = req.mutable_inventory();
      inv->set_node_name(flags["--name"] + "-" + std::to_string(i));
      inv->set_hostname(std::string(256, 'h'));
      inv->set_rack(std::string(256, 'r'));
      inv->add_addresses(flags["--address"]);
      for (int a = 1; a < 16; ++a) inv->add_addresses(std::string(256, static_cast<char>('a' + a)));
      inv->set_cpu_cores(1);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      sec::AttachToken(&ctx, join);
      v1::RegisterResponse resp;
      grpc::Status s = stub->Register(&ctx, req, &resp);
      if (!s.ok()) {
        std::cout << "registered: " << registered << " nodes" << std::endl;
        return Refused(s);
      }
      ++registered;
    }
    std::cout << "registered: " << registered << " nodes" << std::endl;
    return 0;
  }
  if (mode == "forge-logs") {
    const uint64_t ids = flags.count("--ids") ? std::stoull(flags["--ids"]) : 2000;
    return ForgeLogs(*stub, join, flags["--name"], flags["--address"], hold, ids);
  }
  if (mode == "get-logs") {
    auto submit_token = sec::ReadSecret("submit token", Env("RINGMASTER_TOKEN_FILE"), "");
    if (!submit_token.ok()) {
      std::cerr << submit_token.status() << "\n";
      return 1;
    }
    auto coordinator = v1::Coordinator::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    sec::AttachToken(&ctx, submit_token->value_or(""));
    v1::GetLogsRequest req;
    req.set_job_id(flags["--job"]);
    req.set_rank(static_cast<uint32_t>(std::stoull(flags["--rank"])));
    v1::GetLogsResponse resp;
    grpc::Status s = coordinator->GetLogs(&ctx, req, &resp);
    if (!s.ok()) return Refused(s);
    std::cout << "accepted: " << resp.data().size() << " bytes" << std::endl;
    return 0;
  }
  if (mode == "register") {
    v1::RegisterRequest req;
    req.mutable_agent_version()->set_major(1);
    req.set_previous_node_id(flags["--previous-node-id"]);
    req.mutable_inventory()->set_node_name(flags["--name"]);
    req.mutable_inventory()->add_addresses(flags["--address"]);
    req.mutable_inventory()->set_cpu_cores(1);
    if (flags.count("--gpu-name-bytes")) {
      v1::GpuInfo* gpu = req.mutable_inventory()->add_gpus();
      gpu->set_name(std::string(std::stoul(flags["--gpu-name-bytes"]), 'G'));
      gpu->set_memory_bytes(uint64_t{16} << 30);
      gpu->set_compute_capability_major(8);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    sec::AttachToken(&ctx, join);
    v1::RegisterResponse resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    if (!s.ok()) return Refused(s);
    std::cout << "registered: " << resp.node_id() << std::endl;
    if (hold <= 0) return 0;
    return HoldStream(*stub, join, resp.node_id(), resp.node_secret(), hold);
  }
  if (mode == "stale-flood") return StaleFlood(*stub, join, flags);
  if (mode == "idle-streams") return IdleStreams(*channel, join, flags, hold);
  if (mode == "calls") {
    // A flood of calls the coordinator must refuse (a wrong or missing token), as fast as it
    // answers, on one connection.
    const int repeat = std::atoi(flags["--repeat"].c_str());
    const std::string method = flags["--method"];
    if (repeat < 1 || (method != "register" && method != "list-nodes")) {
      std::cerr << "rogue_agent calls: needs --method register|list-nodes and --repeat N >= 1\n";
      return 1;
    }
    std::string token = join;
    if (flags.count("--token")) token = flags["--token"] == "none" ? "" : flags["--token"];
    auto coordinator = v1::Coordinator::NewStub(*channel);
    int unauthenticated = 0;
    for (int i = 0; i < repeat; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      sec::AttachToken(&ctx, token);
      grpc::Status s;
      if (method == "register") {
        v1::RegisterRequest req;
        req.mutable_agent_version()->set_major(1);
        req.mutable_inventory()->set_node_name("flood-" + std::to_string(i));
        req.mutable_inventory()->add_addresses("127.0.0.1");
        v1::RegisterResponse resp;
        s = stub->Register(&ctx, req, &resp);
      } else {
        v1::ListNodesResponse resp;
        s = coordinator->ListNodes(&ctx, v1::ListNodesRequest(), &resp);
      }
      if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) ++unauthenticated;
    }
    std::cout << "unauthenticated: " << unauthenticated << " of " << repeat << std::endl;
    return unauthenticated == repeat ? 0 : 2;
  }
  if (mode == "submit") {
    // A submit-token holder's oversized or malformed request: --job FILE, --request-id-bytes N
    // (a request id of N 'r's), --base-dir-bytes N (a base_dir of N bytes), --base-dir TEXT
    // ("\\0" stands for a NUL byte).
    auto submit_token = sec::ReadSecret("submit token", Env("RINGMASTER_TOKEN_FILE"), "");
    if (!submit_token.ok()) {
      std::cerr << submit_token.status() << "\n";
      return 1;
    }
    std::ifstream in(flags["--job"]);
    std::stringstream yaml;
    yaml << in.rdbuf();
    v1::SubmitJobRequest req;
    req.mutable_client_version()->set_major(1);
    req.set_job_yaml(yaml.str());
    req.set_source("job.yaml");
    std::string base = flags["--base-dir"];
    for (size_t at; (at = base.find("\\0")) != std::string::npos;) base.replace(at, 2, 1, '\0');
    if (flags.count("--base-dir-bytes")) base.assign(std::stoul(flags["--base-dir-bytes"]), 'd');
    req.set_base_dir(base);
    if (flags.count("--request-id-bytes")) {
      req.set_request_id(std::string(std::stoul(flags["--request-id-bytes"]), 'r'));
    }
    auto coordinator = v1::Coordinator::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    sec::AttachToken(&ctx, submit_token->value_or(""));
    v1::SubmitJobResponse resp;
    grpc::Status s = coordinator->SubmitJob(&ctx, req, &resp);
    if (!s.ok()) return Refused(s);
    std::cout << "accepted: " << resp.job_id() << std::endl;
    return 0;
  }
  std::cerr << "rogue_agent: unknown mode " << mode << "\n";
  return 1;
}
