// CoordinatorServer: gRPC server assembly and the ticker.
#include "coordinator/service/coordinator_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster::coordinator {

CoordinatorServer::CoordinatorServer(Cluster& cluster, security::TokenPolicy tokens,
                                     security::Refusals& refusals, const CallLimitOptions& limits,
                                     NodeCertBinding node_certs)
    : cluster_(cluster),
      tokens_(std::move(tokens)),
      limits_(limits),
      coordinator_service_(cluster, tokens_, refusals, &limits_),
      agent_service_(cluster, tokens_, refusals, &limits_, std::move(node_certs)) {}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& listen_address, Cluster& cluster, absl::Duration tick_every,
    ServerSecurity security) {
  if (security.credentials == nullptr) {
    return absl::InvalidArgumentError("CoordinatorServer: no server credentials");
  }
  security::Refusals& refusals =
      security.refusals != nullptr ? *security.refusals : security::ProcessRefusals();
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(cluster, std::move(security.tokens),
                                                             refusals, security.limits,
                                                             std::move(security.node_certs)));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen_address, security.credentials, &s->port_);
  builder.RegisterService(&s->coordinator_service_);
  builder.RegisterService(&s->agent_service_);
  builder.SetMaxReceiveMessageSize(4 << 20);  // a 256 KiB job spec, with room
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen_address,
                     " (in use or not local, or a TLS certificate and key that do not match)"));
  }
  if (tick_every > absl::ZeroDuration()) {
    CoordinatorServer* self = s.get();
    s->ticker_ = std::thread([self, tick_every] {
      while (!self->stop_ticker_.WaitForNotificationWithTimeout(tick_every)) {
        self->cluster_.Tick();
      }
    });
  }
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

void CoordinatorServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  cluster_.Shutdown();  // WatchJob handlers return
  if (!stop_ticker_.HasBeenNotified()) stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
  // A deadline of now cancels open streams (Heartbeat) at once instead of waiting for them.
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  if (server_) server_->Wait();
}

void CoordinatorServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace ringmaster::coordinator
