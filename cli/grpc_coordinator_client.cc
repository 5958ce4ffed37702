#include "cli/grpc_coordinator_client.h"

#include <atomic>
#include <optional>
#include <thread>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "ringmaster/v1/coordinator.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

bool Terminal(v1::JobPhase p) {
  return p == v1::JOB_PHASE_SUCCEEDED || p == v1::JOB_PHASE_FAILED || p == v1::JOB_PHASE_CANCELLED;
}

}  // namespace

struct GrpcCoordinatorClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  std::string token;
  absl::Duration timeout;
  std::optional<CoordinatorTarget> target;

  // A call's error, explained when it is a transport failure (common/connect_error.h).
  absl::Status Error(const grpc::Status& s) const {
    absl::Status a = FromGrpc(s);
    return target.has_value() ? ExplainCoordinatorError(a, *target) : a;
  }

  // The deadline and the token of a unary call.
  void Prepare(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
    security::AttachToken(ctx, token);
  }
};

GrpcCoordinatorClient::GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                                             std::string token, absl::Duration rpc_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->channel = std::move(channel);
  impl_->token = std::move(token);
  impl_->stub = v1::Coordinator::NewStub(impl_->channel);
  impl_->timeout = rpc_timeout;
}

GrpcCoordinatorClient::~GrpcCoordinatorClient() = default;

void GrpcCoordinatorClient::set_target(CoordinatorTarget target) {
  impl_->target = std::move(target);
}

bool GrpcCoordinatorClient::WaitForConnected(absl::Duration timeout) {
  return impl_->channel->WaitForConnected(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
}

absl::StatusOr<v1::SubmitJobResponse> GrpcCoordinatorClient::SubmitJob(
    const v1::SubmitJobRequest& req) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::SubmitJobResponse resp;
  if (grpc::Status s = impl_->stub->SubmitJob(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return resp;
}

absl::StatusOr<v1::JobStatus> GrpcCoordinatorClient::GetJob(const std::string& job_id) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  v1::JobStatus resp;
  if (grpc::Status s = impl_->stub->GetJob(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> GrpcCoordinatorClient::ListJobs(
    const v1::ListJobsRequest& req) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::ListJobsResponse resp;
  if (grpc::Status s = impl_->stub->ListJobs(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return resp;
}

absl::StatusOr<v1::JobStatus> GrpcCoordinatorClient::CancelJob(const std::string& job_id,
                                                               const std::string& reason) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::CancelJobRequest req;
  req.set_job_id(job_id);
  req.set_reason(reason);
  v1::JobStatus resp;
  if (grpc::Status s = impl_->stub->CancelJob(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return resp;
}

absl::StatusOr<v1::ListNodesResponse> GrpcCoordinatorClient::ListNodes() {
  // Every page, one call each (the coordinator pages its registry, issue #20); a coordinator
  // without paging sends everything at once and no token.
  v1::ListNodesResponse all;
  v1::ListNodesRequest req;
  for (int page = 0;; ++page) {
    if (page >= 10000)
      return absl::InternalError("ListNodes: the coordinator never ended its pages");
    grpc::ClientContext ctx;
    impl_->Prepare(&ctx);
    v1::ListNodesResponse resp;
    if (grpc::Status s = impl_->stub->ListNodes(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
    for (v1::NodeInfo& n : *resp.mutable_nodes()) *all.add_nodes() = std::move(n);
    if (resp.next_page_token().empty() || resp.next_page_token() == req.page_token()) break;
    req.set_page_token(resp.next_page_token());
  }
  return all;
}

absl::StatusOr<v1::GetLogsResponse> GrpcCoordinatorClient::GetLogs(const v1::GetLogsRequest& req) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::GetLogsResponse resp;
  if (grpc::Status s = impl_->stub->GetLogs(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return resp;
}

absl::Status GrpcCoordinatorClient::ForgetNode(const std::string& node_name) {
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::ForgetNodeRequest req;
  req.set_node_name(node_name);
  v1::ForgetNodeResponse resp;
  if (grpc::Status s = impl_->stub->ForgetNode(&ctx, req, &resp); !s.ok()) return impl_->Error(s);
  return absl::OkStatus();
}

absl::Status GrpcCoordinatorClient::WatchJob(
    const std::string& job_id, const std::function<void(const v1::JobStatus&)>& on_status,
    const std::function<bool()>& cancelled) {
  {
    grpc::ClientContext ctx;
    security::AttachToken(&ctx, impl_->token);
    v1::WatchJobRequest req;
    req.set_job_id(job_id);
    req.set_min_interval_ms(500);
    auto reader = impl_->stub->WatchJob(&ctx, req);
    // A blocking Read cannot look at `cancelled`: a helper cancels the call when it turns true.
    std::atomic<bool> done{false};
    std::thread canceller([&] {
      while (!done.load()) {
        if (cancelled()) {
          ctx.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    v1::JobStatus st;
    bool terminal = false, any = false;
    while (reader->Read(&st)) {
      any = true;
      on_status(st);
      if (Terminal(st.phase())) terminal = true;
    }
    grpc::Status s = reader->Finish();
    done.store(true);
    canceller.join();
    if (cancelled()) return absl::CancelledError("interrupted");
    if (terminal) return absl::OkStatus();
    if (s.error_code() != grpc::StatusCode::UNIMPLEMENTED || any) {
      return s.ok() ? absl::UnavailableError("WatchJob ended before the job did") : impl_->Error(s);
    }
  }
  // The server has no WatchJob: poll.
  while (!cancelled()) {
    absl::StatusOr<v1::JobStatus> st = GetJob(job_id);
    if (!st.ok()) return st.status();
    on_status(*st);
    if (Terminal(st->phase())) return absl::OkStatus();
    for (int i = 0; i < 10 && !cancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return absl::CancelledError("interrupted");
}

}  // namespace ringmaster::cli
