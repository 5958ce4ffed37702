// The backend-independent collective interface the trainer's data-parallel code is written
// against. Two backends implement it: Gloo over TCP (gloo_communicator.h: CPU ranks, host
// memory) and NCCL (nccl_communicator.h: one CUDA device per rank, device memory);
// DistContext (trainer/parallel/dist_context.h) picks one from the job's `distributed.backend`.
//
// Contract shared by every backend:
//  - All ranks must issue the same collectives in the same order (they are matched by a
//    per-communicator sequence number, not by name).
//  - Every operation takes the DataType of its elements and counts in elements of it. Sums
//    (AllReduceSum, ReduceScatterSum) accept the numeric types and refuse kBytes; the data
//    movers (AllGather, AllToAll, Broadcast) accept every type.
//  - Every operation is enqueued on a CommStream and returns a Work. The backend's own stream
//    (a default CommStream) serves callers that do not care; a CUDA stream orders the operation
//    after the work already on it and lets later work on it see the result, so communication
//    overlaps compute on other streams. Buffers must stay valid, and inputs unmodified, until
//    the Work is done.
//  - Gloo and the world of one run the operation on the calling thread and hand back a Work
//    that is already done; they accept only the default stream. NCCL returns at once with the
//    operation enqueued; its Work completes on a CUDA event.
//  - Every operation is bounded by the timeout the communicator was created with: Work::Wait
//    never hangs. A peer that died or stalled yields an error naming the operation and its
//    sequence number (DeadlineExceeded for a timeout, Unavailable for a lost connection).
//  - Argument errors (a bad root, kBytes to a sum, a buffer the backend cannot reach) are
//    InvalidArgument, consume no sequence number and leave the communicator usable.
//  - After any other error the communicator is in an unknown state: the caller must discard it
//    and rebuild one (on a fresh rendezvous) before communicating again.
//
// Backends implement the typed, stream-ordered virtuals (`...Async`). The blocking forms below
// them (typed, and the float/byte forms the CPU data-parallel code calls) enqueue on the
// default stream and wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "trainer/comm/work.h"

namespace ringmaster::trainer {

// Element types on the wire. Sums of kBFloat16 and kFloat16 are computed in fp32 and rounded to
// the type (Gloo adds the ranks' values in rank order and rounds once per element; NCCL rounds
// as its algorithm combines them, so its low bits may differ). kInt8 sums wrap modulo 256.
enum class DataType : uint8_t { kFloat32, kBFloat16, kFloat16, kInt8, kBytes };

constexpr size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kBFloat16:
    case DataType::kFloat16:
      return 2;
    case DataType::kInt8:
    case DataType::kBytes:
      return 1;
  }
  return 1;
}

// "fp32", "bf16", "fp16", "int8", "bytes".
const char* DataTypeName(DataType t);

// Whether AllReduceSum/ReduceScatterSum accept `t` (every type but kBytes).
constexpr bool IsSummable(DataType t) { return t != DataType::kBytes; }

// Where an operation is ordered: a stream of the backend's device. Default-constructed, it is the
// communicator's own (NCCL: an internal non-blocking stream; Gloo: the calling thread). For CUDA
// it wraps a cudaStream_t, so that this header needs no CUDA headers.
class CommStream {
 public:
  CommStream() = default;
  // `handle`: a cudaStream_t (a pointer type) of the communicator's device.
  explicit CommStream(void* handle) : handle_(handle) {}

  void* handle() const { return handle_; }
  bool is_default() const { return handle_ == nullptr; }

 private:
  void* handle_ = nullptr;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // ---- What backends implement. `count` counts elements of `type`.

  // data[i] <- sum over ranks of data[i], in place on every rank.
  virtual std::shared_ptr<Work> AllReduceSumAsync(void* data, size_t count, DataType type,
                                                  CommStream stream) = 0;

  // `in` holds size() * count_per_rank elements; `out` receives the count_per_rank elements of
  // block rank() of the element-wise sum over ranks. `in` and `out` must not overlap.
  virtual std::shared_ptr<Work> ReduceScatterSumAsync(const void* in, void* out,
                                                      size_t count_per_rank, DataType type,
                                                      CommStream stream) = 0;

  // `out` (size() * count_per_rank elements) receives every rank's `in` (count_per_rank
  // elements), in rank order. `in` and `out` must not overlap.
  virtual std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count_per_rank,
                                               DataType type, CommStream stream) = 0;

  // `in` holds size() blocks of count_per_rank elements, block j for rank j; `out` receives
  // size() blocks, block j from rank j. `in` and `out` must not overlap.
  virtual std::shared_ptr<Work> AllToAllAsync(const void* in, void* out, size_t count_per_rank,
                                              DataType type, CommStream stream) = 0;

  // Every rank's data[0..count) becomes rank `root`'s.
  virtual std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                               CommStream stream) = 0;

  // Done once every rank has entered the barrier (for a CUDA stream: once the barrier, ordered
  // on that stream, has run on every rank).
  virtual std::shared_ptr<Work> BarrierAsync(CommStream stream) = 0;

  // ---- Blocking, typed: enqueue on the communicator's own stream and wait. On OK the result is
  // in place (for NCCL: visible to every stream of the device).

  absl::Status AllReduceSum(void* data, size_t count, DataType type) {
    return AllReduceSumAsync(data, count, type, CommStream())->Wait();
  }
  absl::Status ReduceScatterSum(const void* in, void* out, size_t count_per_rank, DataType type) {
    return ReduceScatterSumAsync(in, out, count_per_rank, type, CommStream())->Wait();
  }
  absl::Status AllGather(const void* in, void* out, size_t count_per_rank, DataType type) {
    return AllGatherAsync(in, out, count_per_rank, type, CommStream())->Wait();
  }
  absl::Status AllToAll(const void* in, void* out, size_t count_per_rank, DataType type) {
    return AllToAllAsync(in, out, count_per_rank, type, CommStream())->Wait();
  }
  absl::Status Broadcast(void* data, size_t count, DataType type, int root) {
    return BroadcastAsync(data, count, type, root, CommStream())->Wait();
  }
  absl::Status Barrier() { return BarrierAsync(CommStream())->Wait(); }

  // ---- Blocking fp32 and byte forms (what the CPU data-parallel code calls).

  absl::Status AllReduceSum(float* data, size_t n) {
    return AllReduceSum(data, n, DataType::kFloat32);
  }
  absl::Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank) {
    return ReduceScatterSum(in, out, n_per_rank, DataType::kFloat32);
  }
  absl::Status AllGather(const float* in, float* out, size_t n_per_rank) {
    return AllGather(in, out, n_per_rank, DataType::kFloat32);
  }
  // Byte all-to-all: `in` holds size() blocks of `bytes_per_rank` bytes.
  absl::Status AllToAll(const void* in, void* out, size_t bytes_per_rank) {
    return AllToAll(in, out, bytes_per_rank, DataType::kBytes);
  }
  // Byte all-gather: `out` (size() * bytes_per_rank) receives every rank's `in` in rank order.
  absl::Status AllGatherBytes(const void* in, void* out, size_t bytes_per_rank) {
    return AllGather(in, out, bytes_per_rank, DataType::kBytes);
  }
  absl::Status Broadcast(float* data, size_t n, int root) {
    return Broadcast(data, n, DataType::kFloat32, root);
  }
};

// InvalidArgument naming `backend`, `op` and `rank` when `type` cannot be summed (kBytes).
absl::Status CheckSummable(const char* backend, const char* op, int rank, DataType type);

}  // namespace ringmaster::trainer
