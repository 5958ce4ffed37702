#include "agent/grpc_coordinator_link.h"

#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "ringmaster/v1/agent.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::agent {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

class GrpcHeartbeatStream final : public HeartbeatStream {
 public:
  GrpcHeartbeatStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& token)
      : stub_(v1::AgentService::NewStub(channel)) {
    security::AttachToken(&context_, token);
    stream_ = stub_->Heartbeat(&context_);
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~GrpcHeartbeatStream() override {
    context_.TryCancel();
    reader_.join();
  }

  bool Write(const v1::AgentMessage& msg) override {
    if (Broken()) return false;
    if (!stream_->Write(msg)) {
      // The reader sees the stream end too and records why.
      absl::MutexLock l(&mu_);
      if (status_.ok()) status_ = absl::UnavailableError("heartbeat stream: write failed");
      broken_ = true;
      return false;
    }
    return true;
  }

  std::optional<v1::CoordinatorMessage> Read(absl::Duration timeout) override {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !inbox_.empty() || broken_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (inbox_.empty()) return std::nullopt;
    v1::CoordinatorMessage m = std::move(inbox_.front());
    inbox_.pop_front();
    return m;
  }

  bool Broken() const override {
    absl::MutexLock l(&mu_);
    return broken_;
  }
  absl::Status Status() const override {
    absl::MutexLock l(&mu_);
    return status_;
  }

 private:
  void ReadLoop() {
    v1::CoordinatorMessage m;
    while (stream_->Read(&m)) {
      absl::MutexLock l(&mu_);
      inbox_.push_back(std::move(m));
      m = v1::CoordinatorMessage();
    }
    grpc::Status s = stream_->Finish();
    absl::MutexLock l(&mu_);
    broken_ = true;
    if (status_.ok()) {
      status_ = s.ok() ? absl::UnavailableError("heartbeat stream closed by the coordinator")
                       : FromGrpc(s);
    }
  }

  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>> stream_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> inbox_ ABSL_GUARDED_BY(mu_);
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

GrpcCoordinatorLink::GrpcCoordinatorLink(std::shared_ptr<grpc::Channel> channel,
                                         std::string join_token)
    : channel_(std::move(channel)), join_token_(std::move(join_token)) {}

GrpcCoordinatorLink::~GrpcCoordinatorLink() = default;

absl::StatusOr<v1::RegisterResponse> GrpcCoordinatorLink::Register(
    const v1::RegisterRequest& request) {
  auto stub = v1::AgentService::NewStub(channel_);
  // A channel whose connection failed waits out gRPC's reconnect backoff before it tries again,
  // and until then fails every call at once: the agent came back 16-24 s after its coordinator
  // did (issue #31). The agent paces its own attempts (Agent::RetryDelay), so each one starts a
  // connection now and gives it up to 2 s.
  if (channel_->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  security::AttachToken(&ctx, join_token_);
  v1::RegisterResponse resp;
  grpc::Status s = stub->Register(&ctx, request, &resp);
  if (!s.ok()) {
    return target_.has_value() ? ExplainCoordinatorError(FromGrpc(s), *target_) : FromGrpc(s);
  }
  return resp;
}

absl::StatusOr<std::unique_ptr<HeartbeatStream>> GrpcCoordinatorLink::OpenHeartbeat() {
  return std::unique_ptr<HeartbeatStream>(
      std::make_unique<GrpcHeartbeatStream>(channel_, join_token_));
}

}  // namespace ringmaster::agent
