// AgentService: registration and the per-agent Heartbeat stream.
#include "coordinator/service/agent_service.h"

#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "coordinator/service/grpc_status.h"

namespace ringmaster::coordinator {

grpc::Status AgentServiceImpl::Register(grpc::ServerContext* context,
                                        const v1::RegisterRequest* request,
                                        v1::RegisterResponse* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kAgent,
                                                  "AgentService/Register", refusals_);
      !auth.ok()) {
    return auth;
  }
  if (grpc::Status rate = CheckRegisterRate(*context); !rate.ok()) return rate;
  // Issue #31: with node names bound to certificates, the name must be the certificate's own.
  const absl::Status bound = CheckNodeCertificate(
      node_certs_, request->inventory().node_name(),
      node_certs_.enabled ? PeerCertificateNames(*context) : std::vector<std::string>{});
  absl::StatusOr<v1::RegisterResponse> r =
      bound.ok() ? cluster_.Register(*request) : absl::StatusOr<v1::RegisterResponse>(bound);
  if (!r.ok()) {
    if (absl::IsPermissionDenied(r.status()) || absl::IsInvalidArgument(r.status())) {
      // Refused registrations come from callers that hold the join token: counted, and logged
      // within limits, so that a loop of attempts cannot fill the disk (issue #20).
      const std::string peer = context->peer();
      refusals_.Refuse(
          security::Refusal::kRegistration, peer,
          absl::StrCat("refused AgentService/Register from ", peer, ": ", r.status().message()));
    }
    return ToGrpcStatus(r.status());
  }
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::Heartbeat(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>* stream) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kAgent,
                                                  "AgentService/Heartbeat", refusals_);
      !auth.ok()) {
    return auth;
  }
  // Until its first message, the stream is one of the peer's few "waiting" ones, and cancelled
  // at the deadline: idle streams cannot pile up threads (issue #31: 1,500 held 3,018 threads).
  std::optional<CallLimits::Slot> waiting;
  uint64_t armed = 0;
  if (limits_ != nullptr) {
    waiting = limits_->AcquireStream(StreamKind::kHeartbeatFirstMessage, context->peer());
    if (!waiting) {
      const std::string peer = context->peer();
      const std::string why = absl::StrCat(
          "heartbeat streams: ", limits_->options().streams_per_peer,
          " from this host are already waiting for their first message (--max-streams-per-peer)");
      refusals_.Refuse(security::Refusal::kResourceLimit, peer,
                       absl::StrCat("refused AgentService/Heartbeat from ", peer, ": ", why));
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
    }
    armed = first_message_.Arm(context, absl::Now() + limits_->options().first_message_deadline);
  }
  v1::AgentMessage message;
  const bool first = stream->Read(&message);
  if (limits_ != nullptr) {
    first_message_.Disarm(armed);
    waiting.reset();
  }
  if (!first) {
    if (limits_ != nullptr && context->IsCancelled()) {
      return grpc::Status(
          grpc::StatusCode::CANCELLED,
          absl::StrCat("no first message within ",
                       absl::FormatDuration(limits_->options().first_message_deadline)));
    }
    return grpc::Status::OK;
  }
  const std::string node_id = message.node_id();
  auto attached = cluster_.AttachStream(node_id, message.node_secret());
  if (!attached.ok()) {
    // Someone holding the join token tried to speak for a node it did not register.
    if (absl::IsPermissionDenied(attached.status()) || absl::IsAlreadyExists(attached.status())) {
      const std::string peer = context->peer();
      refusals_.Refuse(absl::IsAlreadyExists(attached.status()) ? security::Refusal::kStreamInUse
                                                                : security::Refusal::kNodeSecret,
                       peer,
                       absl::StrCat("refused AgentService/Heartbeat from ", peer, ": ",
                                    attached.status().message()));
    }
    return ToGrpcStatus(attached.status());
  }
  auto [outbox, epoch] = *std::move(attached);
  LogInfo(absl::StrCat("node ", node_id, ": heartbeat stream open"));

  std::thread writer([&stream, outbox = outbox, epoch = epoch] {
    while (std::optional<v1::CoordinatorMessage> m = outbox->WaitPop(epoch)) {
      if (!stream->Write(*m)) {
        outbox->PushFront(*std::move(m));  // the next stream of the node delivers it
        return;
      }
    }
  });
  grpc::Status result = grpc::Status::OK;
  do {
    if (message.node_id() != node_id) {
      result = grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("stream of node ", node_id, " got a message from node ", message.node_id()));
      break;
    }
    if (absl::Status st = cluster_.OnAgentMessage(message); !st.ok()) {
      result = ToGrpcStatus(st);
      break;
    }
  } while (stream->Read(&message));
  cluster_.DetachStream(node_id, epoch);
  writer.join();
  LogInfo(absl::StrCat("node ", node_id, ": heartbeat stream closed"));
  return result;
}

grpc::Status AgentServiceImpl::CheckRegisterRate(grpc::ServerContext& context) {
  if (limits_ == nullptr || limits_->AllowRegister(context.peer())) return grpc::Status::OK;
  const std::string peer = context.peer();
  const std::string why =
      absl::StrCat("register: more than ", limits_->options().register_per_second,
                   " registrations a second (burst ", limits_->options().register_burst,
                   ") from this host (--register-rate); retry later");
  refusals_.Refuse(security::Refusal::kResourceLimit, peer,
                   absl::StrCat("refused AgentService/Register from ", peer, ": ", why));
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
}

}  // namespace ringmaster::coordinator
