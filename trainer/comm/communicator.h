// The backend-independent collective interface the trainer's data-parallel code is written
// against. Gloo over TCP (CPU) implements it today; an NCCL backend can implement it later
// without touching callers.
//
// Contract shared by every backend:
//  - All ranks must issue the same collectives in the same order (they are matched by a
//    per-communicator sequence number, not by name).
//  - Every operation is bounded by the timeout the communicator was created with. A peer that
//    died or stalled yields an error naming the operation and its sequence number
//    (DeadlineExceeded for a timeout, Unavailable for a lost connection), never a hang.
//  - After any error the communicator is in an unknown state: the caller must discard it and
//    rebuild one (on a fresh rendezvous) before communicating again.
#pragma once

#include <cstddef>

#include "absl/status/status.h"

namespace ringmaster::trainer {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // data[i] <- sum over ranks of data[i], in place on every rank.
  virtual absl::Status AllReduceSum(float* data, size_t n) = 0;

  // `in` holds size() * n_per_rank floats; `out` receives the n_per_rank floats of block rank()
  // of the element-wise sum over ranks. `in` and `out` must not overlap.
  virtual absl::Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank) = 0;

  // `out` (size() * n_per_rank floats) receives every rank's `in` (n_per_rank floats), in rank
  // order. `in` and `out` must not overlap.
  virtual absl::Status AllGather(const float* in, float* out, size_t n_per_rank) = 0;

  // Byte all-to-all: `in` holds size() blocks of `bytes_per_rank` bytes, block j for rank j;
  // `out` receives size() blocks, block j from rank j. `in` and `out` must not overlap.
  virtual absl::Status AllToAll(const void* in, void* out, size_t bytes_per_rank) = 0;

  // Byte all-gather: `out` (size() * bytes_per_rank) receives every rank's `in` in rank order.
  virtual absl::Status AllGatherBytes(const void* in, void* out, size_t bytes_per_rank) = 0;

  // Every rank's data[0..n) becomes rank `root`'s.
  virtual absl::Status Broadcast(float* data, size_t n, int root) = 0;

  // Returns once every rank has entered the barrier.
  virtual absl::Status Barrier() = 0;
};

}  // namespace ringmaster::trainer
