// Communicator over Gloo's TCP transport: the CPU backend for multi-rank training.
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
