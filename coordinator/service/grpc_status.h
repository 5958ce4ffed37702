// absl::Status <-> grpc::Status, one to one by code (types.proto: RPC errors are gRPC status codes
// mapped from absl::StatusCode). Only the gRPC glue (the *_service.cc files) calls these; the
// rest of the coordinator speaks absl::Status.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ringmaster::coordinator {

// The same code and message; OK maps to OK. absl codes and grpc codes share their numbering
// (both follow google.rpc.Code), so every code maps to itself.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringmaster::coordinator
