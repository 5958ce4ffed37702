// bench_scale's simulated agents: each registers over its own gRPC channel with the callback
// API, then opens the bidirectional Heartbeat stream with the agent's first report and waits
// for its StartRanks (acknowledging it, as the real agent does, unless --no-ack).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/bench/bench_common.h"
#include "grpcpp/grpcpp.h"
#include "ringmaster/v1/agent.grpc.pb.h"

namespace ringmaster::bench_scale {

namespace v1 = ringmaster::v1;

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

  void Start();
  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;

 private:
  void Send(v1::AgentMessage m);

  Run* run_;
  SimAgent* agent_;
  grpc::ClientContext ctx_;
  v1::CoordinatorMessage in_;
  std::mutex mu_;
  std::deque<v1::AgentMessage> writing_;  // front: the write in flight
  bool first_done_ = false;
  uint64_t seq_ = 0;
};

// Node i of n: racks of `per_rack` nodes, "gpu-r017-n05" style names, 10.R.N.1 addresses.
v1::NodeInventory MakeInventory(int i, int gpus, int per_rack);

}  // namespace ringmaster::bench_scale
