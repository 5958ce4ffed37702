// The CLI's view of the Coordinator service, as an interface: GrpcCoordinatorClient is the real
// one (the only CLI code that knows gRPC); tests use fakes.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "ringmaster/v1/coordinator.pb.h"

namespace ringmaster::cli {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& req) = 0;
  virtual absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id) = 0;
  virtual absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req) = 0;
  virtual absl::StatusOr<v1::JobStatus> CancelJob(const std::string& job_id,
                                                  const std::string& reason) = 0;
  virtual absl::StatusOr<v1::ListNodesResponse> ListNodes() = 0;
  virtual absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& req) = 0;
  // Frees a node name whose agent is away (`ringmaster nodes forget`); the submit token's call.
  virtual absl::Status ForgetNode(const std::string& node_name) {
    return absl::UnimplementedError("ForgetNode: not supported by this client (" + node_name + ")");
  }
  // Calls `on_status` with the job's status and every change until a terminal phase (OK), an
  // error, or `cancelled()` returning true (Cancelled). `cancelled` is polled, at least every
  // 200 ms.
  virtual absl::Status WatchJob(const std::string& job_id,
                                const std::function<void(const v1::JobStatus&)>& on_status,
                                const std::function<bool()>& cancelled) = 0;
};

}  // namespace ringmaster::cli
