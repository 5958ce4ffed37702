#include "common/collective_observer.h"

namespace ringmaster::trainer {

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduceSum:
      return "AllReduceSum";
    case Collective::kReduceScatterSum:
      return "ReduceScatterSum";
    case Collective::kAllGather:
      return "AllGather";
    case Collective::kAllToAll:
      return "AllToAll";
    case Collective::kAllGatherBytes:
      return "AllGatherBytes";
    case Collective::kBroadcast:
      return "Broadcast";
    case Collective::kBarrier:
      return "Barrier";
  }
  return "Unknown";
}

}  // namespace ringmaster::trainer
