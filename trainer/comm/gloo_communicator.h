// Communicator over Gloo's TCP transport: the CPU backend for multi-rank training. Buffers are
// host memory; every operation runs on the calling thread and returns a Work that is already
// done (Gloo takes only the default CommStream). fp32 all-reduce is Gloo's own; bf16, fp16 and
// int8 all-reduce are a reduce-scatter (all-to-all, summed in fp32/int32 in rank order and
// rounded once) followed by an all-gather, so every rank gets the same bits.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/store.h"

namespace ringmaster::trainer {

class GlooCommunicator {
 public:
  // Bootstraps rank `rank` of `size` by publishing this rank's TCP address in `store` and
  // connecting to every peer (full mesh). `iface_or_host` is the host name or IP address to
  // listen on (e.g. "127.0.0.1"); a value naming a network interface (e.g. "eth0") is used as
  // an interface instead. `timeout` bounds the rendezvous and each later collective.
  //
  // `store` must be fresh for this communicator (use PrefixStore to reuse one backing store
  // across generations); it is only used during Create.
  //
  // A process whose SIGPIPE disposition is the default gets SIGPIPE ignored, so that a peer
  // dying mid-collective fails the operation instead of killing this rank.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(Store& store, int rank, int size,
                                                              const std::string& iface_or_host,
                                                              absl::Duration timeout);
};

}  // namespace ringmaster::trainer
