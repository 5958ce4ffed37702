// Fuzzes the coordinator's request handlers: the gRPC service implementations
// (CoordinatorServiceImpl, AgentServiceImpl::Register) and Cluster::OnAgentMessage
// and AttachStream (what each Heartbeat stream message and stream opening reach), called directly
// as gRPC would call them, on a fresh Cluster per input with an in-memory job database and a
// FakeClock.
//
// The input is a sequence of records: one byte naming the call, a 2-byte little-endian length,
// then that many bytes parsed as the call's request message (records that do not parse are
// skipped, as gRPC would refuse them). A clock record moves the FakeClock forward by its first
// byte in seconds and ticks the cluster, so rendezvous windows and lost heartbeats happen too.
//
// Properties: no crash or sanitizer report; every refusal is a gRPC error with a message; every
// job the cluster lists can be fetched by id.
#include <grpcpp/server_context.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "coordinator/cluster/cluster.h"
#include "coordinator/service/agent_service.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/state/clock.h"
#include "coordinator/state/job_db.h"
#include "fuzz/fuzz_check.h"

namespace rc = ringmaster::coordinator;
namespace v1 = ringmaster::v1;

namespace {

enum Call : uint8_t {
  kSubmitJob,
  kGetJob,
  kListJobs,
  kCancelJob,
  kListNodes,
  kRegister,
  kAgentMessage,
  kClock,
  kAttachStream,  // a Heartbeat stream opens; the payload is the node id
  kNumCalls,
};

void CheckReply(const grpc::Status& s) {
  FUZZ_CHECK(s.ok() || !s.error_message().empty(), "a refusal says why");
}

template <typename Request>
bool Parse(const uint8_t* p, size_t n, Request* r) {
  return r->ParseFromArray(p, static_cast<int>(n));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rc::FakeClock clock;
  auto db = rc::JobDb::Open(":memory:", clock);
  FUZZ_CHECK(db.ok(), "an in-memory database opens");
  rc::ClusterOptions options;
  options.windows.last_call = absl::Seconds(5);
  options.windows.join_timeout = absl::Seconds(60);
  options.job.coordinator_address = "coord:7070";
  auto cluster = rc::Cluster::Create(options, **db, clock);
  FUZZ_CHECK(cluster.ok(), "a cluster starts on an empty database");
  rc::CoordinatorServiceImpl coordinator(**cluster);
  rc::AgentServiceImpl agents(**cluster);
  grpc::ServerContext context;
  std::string last_secret;  // node_secret of the last successful Register

  size_t pos = 0;
  while (pos + 3 <= size) {
    const uint8_t call = data[pos] % kNumCalls;
    const size_t len = std::min<size_t>(data[pos + 1] | (data[pos + 2] << 8), size - pos - 3);
    const uint8_t* p = data + pos + 3;
    pos += 3 + len;
    switch (call) {
      case kSubmitJob: {
        v1::SubmitJobRequest r;
        v1::SubmitJobResponse out;
        if (Parse(p, len, &r)) CheckReply(coordinator.SubmitJob(&context, &r, &out));
        break;
      }
      case kGetJob: {
        v1::GetJobRequest r;
        v1::JobStatus out;
        if (Parse(p, len, &r)) CheckReply(coordinator.GetJob(&context, &r, &out));
        break;
      }
      case kListJobs: {
        v1::ListJobsRequest r;
        v1::ListJobsResponse out;
        if (!Parse(p, len, &r)) break;
        const grpc::Status s = coordinator.ListJobs(&context, &r, &out);
        CheckReply(s);
        for (const v1::JobStatus& job : out.jobs()) {
          v1::GetJobRequest get;
          get.set_job_id(job.job_id());
          v1::JobStatus got;
          FUZZ_CHECK(coordinator.GetJob(&context, &get, &got).ok(), "a listed job exists");
        }
        break;
      }
      case kCancelJob: {
        v1::CancelJobRequest r;
        v1::JobStatus out;
        if (Parse(p, len, &r)) CheckReply(coordinator.CancelJob(&context, &r, &out));
        break;
      }
      case kListNodes: {
        v1::ListNodesRequest r;
        v1::ListNodesResponse out;
        if (Parse(p, len, &r)) CheckReply(coordinator.ListNodes(&context, &r, &out));
        break;
      }
      case kRegister: {
        v1::RegisterRequest r;
        v1::RegisterResponse out;
        if (Parse(p, len, &r)) {
          CheckReply(agents.Register(&context, &r, &out));
          if (!out.node_secret().empty()) last_secret = out.node_secret();
        }
        break;
      }
      case kAgentMessage: {
        v1::AgentMessage r;
        if (Parse(p, len, &r)) {
          const absl::Status s = (*cluster)->OnAgentMessage(r);
          FUZZ_CHECK(s.ok() || !s.message().empty(), "a refusal says why");
        }
        break;
      }
      case kClock:
        clock.Advance(absl::Seconds(len > 0 ? p[0] : 1));
        (*cluster)->Tick();
        break;
      case kAttachStream: {
        // The stream stays attached (the cluster holds the outbox); commands queue up in it.
        // The payload names the node; the secret is the last Register's, so that streams of
        // registered nodes open (and those of other nodes are refused).
        auto attached = (*cluster)->AttachStream(std::string(reinterpret_cast<const char*>(p), len),
                                                 last_secret);
        FUZZ_CHECK(attached.ok() || !attached.status().message().empty(), "a refusal says why");
        break;
      }
      default:
        break;
    }
  }
  (*cluster)->Shutdown();
  return 0;
}
