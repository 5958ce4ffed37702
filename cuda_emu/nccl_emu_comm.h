// Internals of the NCCL stand-in (nccl_emu.h has the design): the communicator, the queued
// operations and the progress engine that advances them without blocking. nccl_emu.cc holds the
// NCCL API on top of this.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cuda_emu/nccl_emu_segment.h"

namespace cuda_emu::nccl {

using Clock = std::chrono::steady_clock;

double TimeoutSeconds();  // NCCL_EMU_TIMEOUT_S, default 60.
Clock::duration Timeout();
size_t TypeBytes(ncclDataType_t t);  // 0 for a type the stand-in does not implement.
const char* TypeName(ncclDataType_t t);
// The calling thread's last error (ncclGetLastError for calls without a communicator).
std::string& ThreadLastError();

// One queued operation. Progress() never blocks: ncclSuccess when finished, ncclInProgress
// while it waits for peers, or an error (the communicator's Fail has been called).
struct Op {
  virtual ~Op() = default;
  virtual ncclResult_t Progress(ncclComm& c) = 0;
  std::string what;  // "ncclAllReduce #3 (1000 x fp32)" for messages.
  Clock::time_point start = Clock::now();
  bool collective = true;
  int peer = -1;  // P2P: the other rank.
  bool is_send = false;
  std::string waiting_for;  // Ranks not yet there, for the timeout message.
};

enum Kind : int32_t { kAllReduce = 1, kReduceScatter, kAllGather, kBroadcast };

struct CollectiveOp : Op {
  int32_t kind = 0;
  const char* send = nullptr;
  char* recv = nullptr;
  // AllReduce/Broadcast: elements; ReduceScatter: recvcount; AllGather: sendcount.
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t redop = ncclSum;
  int root = 0;
  OpSignature sig;
  size_t per_chunk = 0;  // Elements of `count` per chunk.
  size_t chunk = 0;
  int stage = 0;  // 0: write the slot; 1: wait for phase A; 2: wait for phase B.
  uint64_t phase_a = 0, phase_b = 0;

  ncclResult_t Progress(ncclComm& c) override;

 private:
  ncclResult_t Waiting(ncclComm& c, const std::vector<int>& missing, const std::string& dead);
};

struct P2POp : Op {
  const char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;
  size_t done = 0;

  ncclResult_t Progress(ncclComm& c) override;

 private:
  ncclResult_t Waiting(ncclComm& c);
};

// Advances every queued op of `c` that may run: collectives strictly in issue order (they share
// the barrier), point-to-point ops in order per peer and direction. Never blocks. ncclSuccess
// when the queue is empty, ncclInProgress while ops wait, or the communicator's error.
ncclResult_t ProgressComm(ncclComm* c);

// Polls until every communicator in `comms` is idle or one fails; the per-op timeouts bound it.
ncclResult_t Drive(const std::vector<ncclComm*>& comms);

}  // namespace cuda_emu::nccl

// The communicator behind ncclComm_t (declared by <nccl.h>).
struct ncclComm {
  cuda_emu::nccl::Segment seg;
  std::string name;
  int nranks = 0;
  int rank = 0;
  int device = 0;
  bool blocking = true;
  bool joined_all = false;
  cuda_emu::nccl::Clock::time_point init_start;
  uint64_t phase = 0;     // Barrier phases this rank has arrived at.
  uint64_t coll_seq = 0;  // Collectives issued (the signature's sequence number).
  std::deque<std::unique_ptr<cuda_emu::nccl::Op>> pending;
  ncclResult_t async_error = ncclSuccess;
  std::string last_error;
  cuda_emu::nccl::Clock::time_point next_liveness_check;
  // False once destroyed or aborted: work queued on a lazy stream (nccl_emu_lazy.h) checks it.
  std::shared_ptr<std::atomic<bool>> alive = std::make_shared<std::atomic<bool>>(true);

  cuda_emu::nccl::SegmentHeader& hdr() const { return seg.header(); }

  // Records a failure as the communicator's async error and last error, and prints it.
  ncclResult_t Fail(ncclResult_t r, const std::string& what);
  void Arrive() { hdr().ranks[rank].arrived.store(++phase, std::memory_order_release); }
  // Whether every rank has reached barrier phase `p`. If not, `missing` lists those that have
  // not, and `dead` says why one of them never will ("" while they may still come).
  bool AllArrived(uint64_t p, std::vector<int>* missing, std::string* dead);
  // Why one of `ranks` will never arrive: it left or aborted, or its process exited ("" if
  // none is known to be gone). Process checks read /proc, so they run at most every 50 ms.
  std::string PeerGone(const std::vector<int>& ranks);
};
