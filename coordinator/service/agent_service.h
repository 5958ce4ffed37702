// gRPC glue for the AgentService (agent.proto). Register goes to the Cluster. Heartbeat runs on
// the handler thread of each agent stream: it reads AgentMessages and hands them to the Cluster,
// while a second thread writes CoordinatorMessages from the node's AgentOutbox (woken by its
// condition). The stream ends when the agent closes it, the call is cancelled, or the server
// shuts down; a newer stream of the same node takes the outbox over.
// With CallLimits (call_limits.h): Register is rate-limited per peer host, a peer may have only so
// many Heartbeat streams waiting for their first message, and one that sends none within the
// deadline is cancelled (RESOURCE_EXHAUSTED / CANCELLED).
// With a NodeCertBinding that is enabled (node_cert_binding.h), Register takes a node name only
// from a client certificate that names it (PERMISSION_DENIED otherwise).
#pragma once

#include "coordinator/cluster/cluster.h"
#include "coordinator/service/call_limits.h"
#include "coordinator/service/node_cert_binding.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::coordinator {

class AgentServiceImpl final : public v1::AgentService::Service {
 public:
  // Register and Heartbeat need the join token when `tokens` has one.
  explicit AgentServiceImpl(Cluster& cluster,
                            const security::TokenPolicy& tokens = security::OpenPolicy(),
                            security::Refusals& refusals = security::ProcessRefusals(),
                            CallLimits* limits = nullptr, NodeCertBinding node_certs = {})
      : cluster_(cluster),
        tokens_(tokens),
        refusals_(refusals),
        limits_(limits),
        node_certs_(std::move(node_certs)) {}

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>* stream) override;

 private:
  Cluster& cluster_;
  const security::TokenPolicy& tokens_;
  security::Refusals& refusals_;  // refused calls: counted, and warned about within limits
  CallLimits* limits_;            // null: no per-peer limits
  const NodeCertBinding node_certs_;
  FirstMessageDeadlines first_message_;

  // OK, or RESOURCE_EXHAUSTED when the caller's host is over its Register rate.
  grpc::Status CheckRegisterRate(grpc::ServerContext& context);
};

}  // namespace ringmaster::coordinator
