// How a job's manager reaches the agent of one node: commands (StartRanks, StopRanks) go out
// through this interface, so JobManager tests record them with a fake and the server queues them
// on the node's Heartbeat stream (AgentOutbox).
#pragma once

#include <cstdint>

#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::coordinator {

class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Queues `message` for the agent and returns the command_id it was given (unique per
  // coordinator process; any command_id already in `message` is replaced). Never blocks on the
  // network; delivery is at least once and the agent's handling is idempotent (agent.proto).
  virtual uint64_t Send(v1::CoordinatorMessage message) = 0;
};

}  // namespace ringmaster::coordinator
