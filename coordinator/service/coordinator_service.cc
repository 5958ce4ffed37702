// Coordinator service: Cluster calls plus the WatchJob loop.
#include "coordinator/service/coordinator_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/service/grpc_status.h"

namespace ringmaster::coordinator {
namespace {

constexpr absl::Duration kDefaultWatchInterval = absl::Seconds(1);
constexpr absl::Duration kLogsTimeout = absl::Seconds(15);  // an agent answers on its next read

bool TerminalPhase(v1::JobPhase p) {
  return p == v1::JOB_PHASE_SUCCEEDED || p == v1::JOB_PHASE_FAILED || p == v1::JOB_PHASE_CANCELLED;
}

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status CoordinatorServiceImpl::SubmitJob(grpc::ServerContext* context,
                                               const v1::SubmitJobRequest* request,
                                               v1::SubmitJobResponse* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kSubmit,
                                                  "Coordinator/SubmitJob", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.SubmitJob(*request), response);
}

grpc::Status CoordinatorServiceImpl::GetJob(grpc::ServerContext* context,
                                            const v1::GetJobRequest* request,
                                            v1::JobStatus* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kRead,
                                                  "Coordinator/GetJob", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.GetJob(request->job_id()), response);
}

grpc::Status CoordinatorServiceImpl::ListJobs(grpc::ServerContext* context,
                                              const v1::ListJobsRequest* request,
                                              v1::ListJobsResponse* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kRead,
                                                  "Coordinator/ListJobs", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.ListJobs(*request), response);
}

grpc::Status CoordinatorServiceImpl::CancelJob(grpc::ServerContext* context,
                                               const v1::CancelJobRequest* request,
                                               v1::JobStatus* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kSubmit,
                                                  "Coordinator/CancelJob", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.CancelJob(*request), response);
}

grpc::Status CoordinatorServiceImpl::GetLogs(grpc::ServerContext* context,
                                             const v1::GetLogsRequest* request,
                                             v1::GetLogsResponse* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kLogs,
                                                  "Coordinator/GetLogs", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.GetLogs(*request, kLogsTimeout), response);
}

grpc::Status CoordinatorServiceImpl::ForgetNode(grpc::ServerContext* context,
                                                const v1::ForgetNodeRequest* request,
                                                v1::ForgetNodeResponse* /*response*/) {
  // An operator's call (the submit token): the join token lets a caller register nodes, never
  // free another node's name.
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kSubmit,
                                                  "Coordinator/ForgetNode", refusals_);
      !auth.ok()) {
    return auth;
  }
  return ToGrpcStatus(cluster_.ForgetNode(request->node_name()));
}

grpc::Status CoordinatorServiceImpl::ListNodes(grpc::ServerContext* context,
                                               const v1::ListNodesRequest* request,
                                               v1::ListNodesResponse* response) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kRead,
                                                  "Coordinator/ListNodes", refusals_);
      !auth.ok()) {
    return auth;
  }
  return Reply(cluster_.ListNodes(*request), response);
}

grpc::Status CoordinatorServiceImpl::WatchJob(grpc::ServerContext* context,
                                              const v1::WatchJobRequest* request,
                                              grpc::ServerWriter<v1::JobStatus>* writer) {
  if (grpc::Status auth = security::AuthorizeCall(tokens_, *context, security::Access::kRead,
                                                  "Coordinator/WatchJob", refusals_);
      !auth.ok()) {
    return auth;
  }
  std::optional<CallLimits::Slot> slot;
  if (limits_ != nullptr) {
    slot = limits_->AcquireStream(StreamKind::kWatchJob, context->peer());
    if (!slot) {
      const std::string peer = context->peer();
      const std::string why =
          absl::StrCat("watch streams: ", limits_->options().streams_per_peer,
                       " from this host are already open (--max-streams-per-peer)");
      refusals_.Refuse(security::Refusal::kResourceLimit, peer,
                       absl::StrCat("refused Coordinator/WatchJob from ", peer, ": ", why));
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
    }
  }
  const absl::Duration min_interval = request->min_interval_ms() == 0
                                          ? kDefaultWatchInterval
                                          : absl::Milliseconds(request->min_interval_ms());
  // The job's own change signal: this stream wakes when its job's status changed, not at other
  // jobs' events or nodes' heartbeats, and reads the status from the signal (issue #31: 1,500
  // streams polling the cluster every 250 ms burnt 114% CPU).
  absl::StatusOr<std::shared_ptr<JobWatch>> watch = cluster_.Watch(request->job_id());
  if (!watch.ok()) return ToGrpcStatus(watch.status());
  uint64_t sent = 0;
  absl::Time last_write = absl::InfinitePast();
  JobWatch::Snapshot now_seen = (*watch)->Current();
  while (true) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    if (now_seen.closed) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    }
    if (now_seen.version != sent) {
      const absl::Time now = absl::Now();
      if (now < last_write + min_interval) {
        now_seen = (*watch)->WaitForChange(
            now_seen.version, std::min(last_write + min_interval - now, cancel_check_));
        continue;
      }
      if (!writer->Write(now_seen.status)) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
      }
      sent = now_seen.version;
      last_write = now;
      if (TerminalPhase(now_seen.status.phase())) return grpc::Status::OK;
    }
    // Nothing new: block until the job changes. The timeout only looks for a client that left
    // (the synchronous API has no cancellation callback); it reads no state.
    now_seen = (*watch)->WaitForChange(sent, cancel_check_);
  }
}

}  // namespace ringmaster::coordinator
