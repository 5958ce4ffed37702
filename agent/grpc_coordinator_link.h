// CoordinatorLink over gRPC (AgentService). The only agent code that knows gRPC: converts
// grpc::Status to absl::Status, and turns the blocking stream read into a reader thread feeding
// a queue so that the agent's loop can wait with a timeout.
#pragma once

#include <memory>
#include <string>

#include "agent/coordinator_link.h"

namespace grpc {
class Channel;
}

namespace ringmaster::agent {

class GrpcCoordinatorLink final : public CoordinatorLink {
 public:
  // `target`: HOST:PORT. Insecure transport for now (TLS and the join token: see agent/README.md).
  explicit GrpcCoordinatorLink(const std::string& target);
  ~GrpcCoordinatorLink() override;

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) override;
  absl::StatusOr<std::unique_ptr<HeartbeatStream>> OpenHeartbeat() override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace ringmaster::agent
