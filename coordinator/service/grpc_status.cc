// absl::Status <-> grpc::Status.
#include "coordinator/service/grpc_status.h"

#include <string>

namespace ringmaster::coordinator {
namespace {

// google.rpc.Code numbering, which both libraries use; anything else is UNKNOWN.
bool KnownCode(int code) { return code >= 0 && code <= 16; }

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(
      KnownCode(code) ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN,
      std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  return absl::Status(
      KnownCode(code) ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown,
      status.error_message());
}

}  // namespace ringmaster::coordinator
