// The coordinator process's server: the two gRPC services over one Cluster, plus
// the ticker thread that drives time (lost nodes, rendezvous deadlines). main() and the
// integration test start it the same way.
//
// Its transport (TLS, mutual TLS, or plaintext on loopback) and the join/submit tokens every call
// is checked against come from main (security/, docs/operations.md "Security").
#pragma once

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "coordinator/cluster/cluster.h"
#include "coordinator/service/agent_service.h"
#include "coordinator/service/call_limits.h"
#include "coordinator/service/coordinator_service.h"
#include "security/refusals.h"
#include "security/token_policy.h"

namespace ringmaster::coordinator {

// How the server is reached: its listening credentials (security::ServerCredentialsFor) and the
// tokens calls must carry (a default TokenPolicy checks none); where refused calls are counted
// and limited (null: the process's, security::ProcessRefusals(), which /metrics shows).
struct ServerSecurity {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  security::TokenPolicy tokens;
  security::Refusals* refusals = nullptr;
  CallLimitOptions limits;     // per-peer Register rate and open streams (call_limits.h)
  NodeCertBinding node_certs;  // node names bound to client certificates (off by default)
};

class CoordinatorServer {
 public:
  // Binds `listen_address` ("host:port"; port 0 picks a free one) and starts serving. With a
  // non-zero `tick_every`, a thread calls Cluster::Tick() that often (real time); tests pass zero
  // and tick by hand with their FakeClock.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const std::string& listen_address,
                                                                  Cluster& cluster,
                                                                  absl::Duration tick_every,
                                                                  ServerSecurity security);
  ~CoordinatorServer();  // Shutdown()

  int port() const { return port_; }
  // Ends every call (open streams included) and stops the ticker. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has been called and the server stopped.
  void Wait();

 private:
  CoordinatorServer(Cluster& cluster, security::TokenPolicy tokens, security::Refusals& refusals,
                    const CallLimitOptions& limits, NodeCertBinding node_certs);

  Cluster& cluster_;
  const security::TokenPolicy tokens_;  // before the services, which hold a reference
  CallLimits limits_;
  CoordinatorServiceImpl coordinator_service_;
  AgentServiceImpl agent_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  bool shut_down_ = false;
};

}  // namespace ringmaster::coordinator
