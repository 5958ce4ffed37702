// The agent's loop: register the node, keep one Heartbeat stream open, carry out the
// coordinator's commands through the RankSupervisor and report every local rank at least once
// per heartbeat interval (and at once when a rank changes state or a command is done).
//
// When the coordinator goes away (the stream breaks, Register fails) the ranks keep running; the
// agent registers again with the same node name, its previous node id and the node's secret (kept
// in identity_file across agent restarts), and reports them on the new stream: at once after a
// stream that lived stable_after, else after an exponential backoff with jitter (at most
// unreachable_retry_max while the coordinator is unreachable), so that a stream that keeps
// breaking cannot make it register in a loop. Every message is made valid for the wire before it
// is written (wire_text.h): a report the coordinator could not parse used to cost the stream,
// again and again (issue #31).
//
// Step() is one iteration and takes its time from the injected clock, so tests drive the agent
// with a fake link and a FakeLauncher without threads or sleeps. Run() is the real loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/coordinator_link.h"
#include "agent/rank_supervisor.h"
#include "ringmaster/v1/types.pb.h"

namespace ringmaster::agent {

struct AgentOptions {
  v1::NodeInventory inventory;
  std::string build = "ringmaster-agent";               // ApiVersion.build
  absl::Duration default_heartbeat = absl::Seconds(2);  // until the coordinator says otherwise
  absl::Duration backoff_min = absl::Milliseconds(250);
  absl::Duration backoff_max = absl::Seconds(10);
  // While the coordinator cannot be reached at all (Register UNAVAILABLE or timing out), retry at
  // least this often (with jitter: 50-100% of it), so that an agent is back within a few seconds
  // of a coordinator restart (issue #31: it took 24 s behind a 10 s backoff).
  absl::Duration unreachable_retry_max = absl::Seconds(2);
  // Where the node id and secret of the latest registration are kept across agent restarts
  // (agent/node_identity.h); empty: in memory only.
  std::string identity_file;
  // A heartbeat stream that breaks sooner than this after it opened is followed by the backoff
  // above (with jitter) before the agent registers again; after a longer one, at once.
  absl::Duration stable_after = absl::Seconds(30);
  absl::Duration shutdown_grace = absl::Seconds(20);  // SIGTERM → SIGKILL when the agent stops
};

class Agent {
 public:
  using Clock = std::function<absl::Time()>;

  Agent(AgentOptions options, CoordinatorLink* link, RankSupervisor* ranks, Clock now);

  // Registers and opens the heartbeat stream (sending the first report on it).
  absl::Status Connect();
  bool connected() const { return stream_ != nullptr; }
  // Where each report's snapshot is published for /metrics (optional; must outlive the agent).
  void set_metrics(AgentMetrics* metrics) { metrics_ = metrics; }
  // How Run() waits between reconnection attempts (tests pass one that moves their clock).
  void set_sleep(std::function<void(absl::Duration)> sleep) { sleep_ = std::move(sleep); }
  const std::string& node_id() const { return node_id_; }
  absl::Duration heartbeat_interval() const { return heartbeat_; }

  // One iteration: waits up to `wait` for a command, carries out every command that arrived,
  // polls the ranks and sends a report when one is due. False when the stream broke (the
  // caller reconnects; the ranks keep running).
  bool Step(absl::Duration wait);

  // Connects, steps and reconnects with backoff until `stop` is set; then stops every rank
  // (SIGTERM, SIGKILL after shutdown_grace) and returns once none runs.
  void Run(const std::atomic<bool>* stop);

 private:
  void Handle(const v1::CoordinatorMessage& msg);
  // How long Run waits before registering again after `why`: `backoff`, at most
  // unreachable_retry_max (jittered) while the coordinator is unreachable.
  absl::Duration RetryDelay(const absl::Status& why, absl::Duration backoff);
  bool SendReport();
  // Makes `msg`'s text fields valid for the wire (wire_text.h); warns the first time one changed.
  void SanitizeOnce(google::protobuf::Message* msg, const char* what);

  AgentOptions options_;
  CoordinatorLink* link_;
  RankSupervisor* ranks_;
  Clock now_;
  std::string node_id_;
  std::string node_secret_;  // from the latest Register; never logged
  absl::Duration heartbeat_;
  std::unique_ptr<HeartbeatStream> stream_;
  uint64_t seq_ = 0;
  absl::Time last_report_ = absl::InfinitePast();
  bool report_now_ = false;
  std::vector<uint64_t> acks_;
  std::vector<v1::CommandError> errors_;
  std::vector<v1::LogTail> logs_;  // answers to SendLogs, sent with the next report
  AgentMetrics* metrics_ = nullptr;
  std::minstd_rand rng_{std::random_device{}()};  // RetryDelay's jitter
  std::function<void(absl::Duration)> sleep_ = [](absl::Duration d) {
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(d));
  };
  bool warned_sanitised_ = false;
  bool warned_oversized_ = false;
};

}  // namespace ringmaster::agent
