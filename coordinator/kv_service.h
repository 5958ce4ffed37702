// gRPC glue for the KvService (kv.proto) over a KvStore. A blocking Get or Wait waits at most
// the request's timeout, capped by the call's deadline.
#pragma once

#include "coordinator/kv_store.h"
#include "ringmaster/v1/kv.grpc.pb.h"
#include "security/call_auth.h"

namespace ringmaster::coordinator {

class KvServiceImpl final : public v1::KvService::Service {
 public:
  // Every call needs the join token when `tokens` has one (the store serves a job's ranks).
  explicit KvServiceImpl(KvStore& store,
                         const security::TokenPolicy& tokens = security::OpenPolicy())
      : store_(store), tokens_(tokens) {}

  grpc::Status Set(grpc::ServerContext* context, const v1::KvSetRequest* request,
                   v1::KvSetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::KvGetRequest* request,
                   v1::KvGetResponse* response) override;
  grpc::Status Wait(grpc::ServerContext* context, const v1::KvWaitRequest* request,
                    v1::KvWaitResponse* response) override;

 private:
  KvStore& store_;
  const security::TokenPolicy& tokens_;
};

}  // namespace ringmaster::coordinator
