// gRPC glue for the Coordinator service (coordinator.proto): requests go to the Cluster, errors
// come back as the matching gRPC codes. WatchJob sends the current status at once, then every
// change (at most one message per min_interval), and ends after a terminal phase, when the
// client cancels, or when the server shuts down (UNAVAILABLE). A quiet WatchJob blocks on its
// job's change signal (Cluster::Watch); it wakes when the job changed, and every
// watch_cancel_check only to see whether its client went away. Submit and cancel need the submit
// token, logs too; the other reads take either token. With CallLimits, a peer host may hold only
// so many WatchJob streams open (RESOURCE_EXHAUSTED beyond).
#pragma once

#include "absl/time/time.h"
#include "coordinator/cluster/cluster.h"
#include "coordinator/service/call_limits.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::coordinator {

class CoordinatorServiceImpl final : public v1::Coordinator::Service {
 public:
  // Each call first checks its token against `tokens` (security/token_policy.h).
  explicit CoordinatorServiceImpl(Cluster& cluster,
                                  const security::TokenPolicy& tokens = security::OpenPolicy(),
                                  security::Refusals& refusals = security::ProcessRefusals(),
                                  CallLimits* limits = nullptr)
      : cluster_(cluster), tokens_(tokens), refusals_(refusals), limits_(limits) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::JobStatus* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobStatus>* writer) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status GetLogs(grpc::ServerContext* context, const v1::GetLogsRequest* request,
                       v1::GetLogsResponse* response) override;
  grpc::Status ForgetNode(grpc::ServerContext* context, const v1::ForgetNodeRequest* request,
                          v1::ForgetNodeResponse* response) override;

  // How long a quiet WatchJob waits before it checks whether its client went away (so how long a
  // gone client's stream, and its CallLimits slot, outlive it). Default 1 s.
  void set_watch_cancel_check(absl::Duration d) { cancel_check_ = d; }

 private:
  Cluster& cluster_;
  const security::TokenPolicy& tokens_;
  security::Refusals& refusals_;  // refused calls: counted, and warned about within limits
  CallLimits* limits_;            // null: no per-peer limits
  absl::Duration cancel_check_ = absl::Seconds(1);
};

}  // namespace ringmaster::coordinator
