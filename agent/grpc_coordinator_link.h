// CoordinatorLink over gRPC (AgentService). The only agent code that knows gRPC: converts
// grpc::Status to absl::Status, and turns the blocking stream read into a reader thread feeding
// a queue so that the agent's loop can wait with a timeout.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "agent/coordinator_link.h"
#include "common/connect_error.h"

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

  // Where the channel points: a failed registration then says what is wrong and which flag
  // fixes it (common/connect_error.h).
  void set_target(CoordinatorTarget target) { target_ = std::move(target); }

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request) override;
  absl::StatusOr<std::unique_ptr<HeartbeatStream>> OpenHeartbeat() override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::string join_token_;
  std::optional<CoordinatorTarget> target_;
};

}  // namespace ringmaster::agent
