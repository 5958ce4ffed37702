// The coordinator process's server: the three gRPC services over one Cluster and KvStore, plus
// the ticker thread that drives time (lost nodes, rendezvous deadlines). main() and the
// integration test start it the same way.
//
// No TLS yet (issue #8): it listens, insecurely, on exactly the address it is given, so bind it
// to an address only the cluster network reaches.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "coordinator/agent_service.h"
#include "coordinator/cluster.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/kv_service.h"
#include "coordinator/kv_store.h"

namespace ringmaster::coordinator {

class CoordinatorServer {
 public:
  // Binds `listen_address` ("host:port"; port 0 picks a free one) and starts serving. With a
  // non-zero `tick_every`, a thread calls Cluster::Tick() that often (real time); tests pass zero
  // and tick by hand with their FakeClock.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const std::string& listen_address,
                                                                  Cluster& cluster, KvStore& kv,
                                                                  absl::Duration tick_every);
  ~CoordinatorServer();  // Shutdown()

  int port() const { return port_; }
  // Ends every call (open streams included) and stops the ticker. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has been called and the server stopped.
  void Wait();

 private:
  CoordinatorServer(Cluster& cluster, KvStore& kv);

  Cluster& cluster_;
  CoordinatorServiceImpl coordinator_service_;
  AgentServiceImpl agent_service_;
  KvServiceImpl kv_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stop_ticker_;
  std::thread ticker_;
  bool shut_down_ = false;
};

}  // namespace ringmaster::coordinator
