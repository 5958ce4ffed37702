// Which collective a rank is in, as an observer interface: TracedCommunicator (trainer/comm)
// calls it, RankStatus (rank_status.h) records it for the agent's hang diagnosis. Here, not in the
// trainer, because the agent reads the same names without linking any communicator.
#pragma once

#include <cstdint>

namespace ringmaster::trainer {

// The collectives of Communicator, as small integers (bounded metric label values). An
// all-gather of bytes is kAllGatherBytes and any other all-gather kAllGather, as before typed
// collectives existed, so that the metric labels stay the same.
enum class Collective : int {
  kAllReduceSum = 0,
  kReduceScatterSum,
  kAllGather,
  kAllToAll,
  kAllGatherBytes,
  kBroadcast,
  kBarrier,
};
inline constexpr int kNumCollectives = 7;
const char* CollectiveName(Collective c);

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  // `seq`: 1-based count of collectives entered through every communicator sharing the counter.
  virtual void OnEnter(uint64_t seq, Collective op) = 0;
  virtual void OnLeave(uint64_t seq, Collective op, double seconds) = 0;
};

}  // namespace ringmaster::trainer
