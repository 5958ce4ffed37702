// CoordinatorLink over gRPC (AgentService). The only agent code that knows gRPC: converts
// grpc::Status to absl::Status, and turns the blocking stream read into a reader thread feeding
// a queue so that the agent's loop can wait with a timeout.
#pragma once

#include <memory>
#include <string>

#include "agent/coordinator_link.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace ringmaster::agent {

class GrpcCoordinatorLink final : public CoordinatorLink {
 public:
  // `channel`: to the coordinator (security::ControlPlaneChannel). Every call carries
  // `join_token` (none when empty).
  GrpcCoordinatorLink(std::shared_ptr<grpc::Channel> channel, std::string join_token);
  ~GrpcCoordinatorLink() override;

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) override;
  absl::StatusOr<std::unique_ptr<HeartbeatStream>> OpenHeartbeat() override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string join_token_;
};

}  // namespace ringmaster::agent
