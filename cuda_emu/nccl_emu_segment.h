// The POSIX shared-memory segment the NCCL stand-in's ranks (processes, or threads of one
// process) meet in. Layout: a SegmentHeader (per-rank state, barrier counters, point-to-point
// channel counters), then one collective staging slot per rank, then one point-to-point slot
// per ordered pair of ranks. All synchronisation is lock-free atomics in the header, so a rank
// that dies holding nothing cannot wedge the others; waiting is polling with a deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda_emu::nccl {

inline constexpr int kMaxRanks = 64;

// What a rank is doing in a collective; every rank's must match before any output is computed.
struct OpSignature {
  uint64_t seq = 0;  // Collectives issued on this communicator before this one.
  uint64_t count = 0;
  int32_t kind = 0;
  int32_t dtype = 0;
  int32_t redop = 0;
  int32_t root = 0;
  bool operator==(const OpSignature&) const = default;
};

enum RankStateValue : int32_t { kFree = 0, kJoined = 1, kLeft = 2, kAborted = 3 };

struct alignas(64) RankSlot {
  std::atomic<uint64_t> arrived;  // Barrier phases this rank has reached (written by it only).
  std::atomic<int32_t> state;     // RankStateValue.
  std::atomic<int32_t> pid;
  OpSignature sig;  // Written before the rank arrives at a collective's first phase.
};

// One direction of one pair of ranks: the sender writes the slot when sent == consumed, then
// bumps `sent`; the receiver copies it out when sent > consumed, then bumps `consumed`.
struct Channel {
  std::atomic<uint64_t> sent;
  std::atomic<uint64_t> consumed;
  std::atomic<uint64_t> bytes;  // Of the chunk in the slot.
};

struct SegmentHeader {
  std::atomic<uint32_t> ready;  // kReadyMagic once the creator has filled in the sizes.
  int32_t nranks;
  uint64_t coll_slot_bytes;
  uint64_t p2p_slot_bytes;
  uint64_t total_bytes;
  std::atomic<int32_t> joined;
  RankSlot ranks[kMaxRanks];
  Channel channels[kMaxRanks * kMaxRanks];  // [src * nranks + dst]
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "process-shared atomics");
static_assert(std::atomic<int32_t>::is_always_lock_free, "process-shared atomics");

class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  // Creates the segment `name` (the first rank to arrive) or maps the one another rank created,
  // waiting for it until `deadline`. Slot sizes come from env NCCL_EMU_SLOT_BYTES (the creator's
  // value wins). "" on success, else what failed.
  std::string Open(const std::string& name, int nranks,
                   std::chrono::steady_clock::time_point deadline);
  // Removes the name (mapped ranks keep the memory). Idempotent.
  void Unlink();

  SegmentHeader& header() const { return *header_; }
  char* coll_slot(int rank) const;
  char* p2p_slot(int src, int dst) const;
  Channel& channel(int src, int dst) const {
    return header_->channels[src * header_->nranks + dst];
  }
  size_t coll_slot_bytes() const { return header_->coll_slot_bytes; }
  size_t p2p_slot_bytes() const { return header_->p2p_slot_bytes; }

 private:
  std::string name_;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  SegmentHeader* header_ = nullptr;
  bool unlinked_ = false;
};

}  // namespace cuda_emu::nccl
