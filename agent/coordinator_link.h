// The agent's connection to the coordinator, as an interface: GrpcCoordinatorLink
// (grpc_coordinator_link.h) is the real one, tests use fakes. Errors are absl::Status; gRPC
// types stay in the glue.
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::agent {

// One open Heartbeat stream. Write and Read are called from the agent's loop thread.
class HeartbeatStream {
 public:
  virtual ~HeartbeatStream() = default;
  // False when the stream is broken.
  virtual bool Write(const v1::AgentMessage& msg) = 0;
  // The next command, waiting up to `timeout`; nullopt on timeout or when the stream is broken.
  virtual std::optional<v1::CoordinatorMessage> Read(absl::Duration timeout) = 0;
  // True once the stream has ended (the coordinator went away or closed it); why, in Status.
  virtual bool Broken() const = 0;
  virtual absl::Status Status() const = 0;
};

class CoordinatorLink {
 public:
  virtual ~CoordinatorLink() = default;
  virtual absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) = 0;
  virtual absl::StatusOr<std::unique_ptr<HeartbeatStream>> OpenHeartbeat() = 0;
};

}  // namespace ringmaster::agent
