// CoordinatorClient over gRPC. Converts grpc::Status to absl::Status one to one. WatchJob falls
// back to polling GetJob (once a second) when the server does not implement WatchJob.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "cli/coordinator_client.h"
#include "common/connect_error.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace ringmaster::cli {

class GrpcCoordinatorClient final : public CoordinatorClient {
 public:
  // `channel`: to the coordinator (security::ControlPlaneChannel). Every call carries `token`
  // (the submit token; none when empty). `rpc_timeout` bounds each unary call.
  GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel, std::string token,
                        absl::Duration rpc_timeout = absl::Seconds(15));
  ~GrpcCoordinatorClient() override;

  // Where the channel points: transport failures then say what is wrong and which flag fixes
  // it (common/connect_error.h) instead of gRPC's text alone.
  void set_target(CoordinatorTarget target);

  // Waits until the channel connects (or `timeout` passes).
  bool WaitForConnected(absl::Duration timeout);

  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(const v1::SubmitJobRequest& req) override;
  absl::StatusOr<v1::JobStatus> GetJob(const std::string& job_id) override;
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req) override;
  absl::StatusOr<v1::JobStatus> CancelJob(const std::string& job_id,
                                          const std::string& reason) override;
  absl::StatusOr<v1::ListNodesResponse> ListNodes() override;
  absl::StatusOr<v1::GetLogsResponse> GetLogs(const v1::GetLogsRequest& req) override;
  absl::Status ForgetNode(const std::string& node_name) override;
  absl::Status WatchJob(const std::string& job_id,
                        const std::function<void(const v1::JobStatus&)>& on_status,
                        const std::function<bool()>& cancelled) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster::cli
