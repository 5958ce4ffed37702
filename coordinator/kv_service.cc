// KvService: request fields to KvStore calls.
#include "coordinator/kv_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "coordinator/grpc_status.h"
#include "coordinator/proto_convert.h"

namespace ringmaster::coordinator {
namespace {

// The request's timeout, but never past the call's deadline.
absl::Duration Timeout(const grpc::ServerContext& context,
                       const google::protobuf::Duration& requested) {
  absl::Duration t = DurationFromProto(requested);
  const auto deadline = context.deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    t = std::min(t, absl::FromChrono(deadline) - absl::Now());
  }
  return t;
}

}  // namespace

grpc::Status KvServiceImpl::Set(grpc::ServerContext* context, const v1::KvSetRequest* request,
                                v1::KvSetResponse*) {
  if (grpc::Status auth =
          security::AuthorizeCall(tokens_, *context, security::Access::kKv, "KvService/Set");
      !auth.ok()) {
    return auth;
  }
  return ToGrpcStatus(store_.Set(request->scope().job_id(), request->scope().generation(),
                                 request->key(), request->value()));
}

grpc::Status KvServiceImpl::Get(grpc::ServerContext* context, const v1::KvGetRequest* request,
                                v1::KvGetResponse* response) {
  if (grpc::Status auth =
          security::AuthorizeCall(tokens_, *context, security::Access::kKv, "KvService/Get");
      !auth.ok()) {
    return auth;
  }
  const bool wait = DurationFromProto(request->timeout()) > absl::ZeroDuration();
  absl::StatusOr<std::string> v =
      store_.Get(request->scope().job_id(), request->scope().generation(), request->key(),
                 wait ? std::max(Timeout(*context, request->timeout()), absl::Nanoseconds(1))
                      : absl::ZeroDuration());
  if (!v.ok()) return ToGrpcStatus(v.status());
  response->set_value(*std::move(v));
  return grpc::Status::OK;
}

grpc::Status KvServiceImpl::Wait(grpc::ServerContext* context, const v1::KvWaitRequest* request,
                                 v1::KvWaitResponse*) {
  if (grpc::Status auth =
          security::AuthorizeCall(tokens_, *context, security::Access::kKv, "KvService/Wait");
      !auth.ok()) {
    return auth;
  }
  const std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  return ToGrpcStatus(store_.Wait(request->scope().job_id(), request->scope().generation(), keys,
                                  Timeout(*context, request->timeout())));
}

}  // namespace ringmaster::coordinator
