#include "cuda_emu/nccl_emu.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cuda_emu/census.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/emu_device_range.h"
#include "cuda_emu/nccl_emu_comm.h"
#include "cuda_emu/nccl_emu_lazy.h"
#include "cuda_emu/streams.h"

using cuda_emu::nccl::Clock;
using cuda_emu::nccl::CollectiveOp;
using cuda_emu::nccl::Drive;
using cuda_emu::nccl::kAllGather;
using cuda_emu::nccl::kAllReduce;
using cuda_emu::nccl::kBroadcast;
using cuda_emu::nccl::kReduceScatter;
using cuda_emu::nccl::Op;
using cuda_emu::nccl::P2POp;
using cuda_emu::nccl::ProgressComm;
using cuda_emu::nccl::ThreadLastError;
using cuda_emu::nccl::Timeout;
using cuda_emu::nccl::TypeBytes;
using cuda_emu::nccl::TypeName;

namespace {

constexpr char kIdPrefix[] = "ncclemu:";

// Group state of the calling thread (NCCL's groups are per thread).
thread_local int t_group_depth = 0;
struct Deferred {
  ncclComm* comm;
  std::unique_ptr<Op> op;
  cudaStream_t stream;
};
thread_local std::vector<Deferred> t_deferred;
thread_local std::vector<ncclComm*> t_group_inits;

ncclResult_t Error(ncclComm* c, ncclResult_t r, const std::string& what) {
  if (c != nullptr) {
    c->last_error = absl::StrCat("NCCL emulator, rank ", c->rank, " of ", c->nranks, ": ", what);
    ThreadLastError() = c->last_error;
  } else {
    ThreadLastError() = absl::StrCat("NCCL emulator: ", what);
  }
  std::fprintf(stderr, "%s\n", ThreadLastError().c_str());
  return r;
}

// Argument checks common to every operation (they do not poison the communicator).
ncclResult_t CheckCall(const char* api, ncclComm* c, ncclDataType_t dtype, cudaStream_t stream) {
  if (c == nullptr) return Error(nullptr, ncclInvalidArgument, absl::StrCat(api, ": null comm"));
  if (c->async_error != ncclSuccess) return c->async_error;
  if (TypeBytes(dtype) == 0) {
    return Error(c, ncclInvalidArgument,
                 absl::StrFormat("%s: data type %d is not implemented by the stand-in (int8, "
                                 "uint8, int32, fp16, bf16, fp32 are)",
                                 api, static_cast<int>(dtype)));
  }
  // In stream order: prior work is done first (lazy streams: the call is queued behind it). The
  // stand-in's own wait, not the application's: no host sync is counted (census).
  if (cuda_emu::StickyError() == cudaSuccess && !cuda_emu::nccl::QueuedOnStream(stream)) {
    cuda_emu::Drain(stream);
  }
  if (cuda_emu::StickyError() != cudaSuccess) {
    return Error(c, ncclUnhandledCudaError, absl::StrCat(api, ": the stream reported an error"));
  }
  return ncclSuccess;
}

ncclResult_t CheckBuffer(const char* api, ncclComm* c, const char* name, const void* p,
                         size_t bytes) {
  int device = -1;
  const std::string err = cuda_emu::CheckDeviceRange(p, bytes, &device);
  if (!err.empty()) {
    return Error(c, ncclInvalidArgument, absl::StrFormat("%s: %s: %s", api, name, err));
  }
  if (bytes > 0 && device != c->device) {
    return Error(c, ncclInvalidArgument,
                 absl::StrFormat("%s: %s (%p) is memory of device %d, the communicator's is %d",
                                 api, name, p, device, c->device));
  }
  return ncclSuccess;
}

// Queues `op` (deferred inside a group), then runs it: to completion on a blocking
// communicator, as far as it goes without waiting on a non-blocking one. Under lazy streams it
// is queued on `stream` instead and runs when the stream reaches it (nccl_emu_lazy.h).
ncclResult_t Submit(ncclComm* c, std::unique_ptr<Op> op, cudaStream_t stream) {
  if (t_group_depth > 0) {
    t_deferred.push_back({c, std::move(op), stream});
    return ncclSuccess;
  }
  if (cuda_emu::nccl::QueuedOnStream(stream)) {
    std::vector<std::unique_ptr<Op>> ops;
    ops.push_back(std::move(op));
    cuda_emu::nccl::EnqueueOnStream(c, std::move(ops), stream);
    return ncclSuccess;
  }
  c->pending.push_back(std::move(op));
  if (c->blocking) return Drive({c});
  return ProgressComm(c);
}

ncclResult_t Collective(const char* api, int32_t kind, const void* send, void* recv, size_t count,
                        ncclDataType_t dtype, ncclRedOp_t redop, int root, ncclComm* c,
                        cudaStream_t stream) {
  ncclResult_t r = CheckCall(api, c, dtype, stream);
  if (r != ncclSuccess) return r;
  if (redop != ncclSum && redop != ncclMax) {
    return Error(c, ncclInvalidArgument,
                 absl::StrFormat("%s: reduction %d is not implemented by the stand-in (ncclSum, "
                                 "ncclMax are)",
                                 api, static_cast<int>(redop)));
  }
  if (root < 0 || root >= c->nranks) {
    return Error(c, ncclInvalidArgument,
                 absl::StrFormat("%s: root %d outside [0, %d)", api, root, c->nranks));
  }
  const size_t es = TypeBytes(dtype), n = static_cast<size_t>(c->nranks);
  const size_t send_bytes = (kind == kReduceScatter ? n * count : count) * es;
  const size_t recv_bytes = (kind == kAllGather ? n * count : count) * es;
  const bool needs_send = kind != kBroadcast || c->rank == root;
  if (needs_send && (r = CheckBuffer(api, c, "sendbuff", send, send_bytes)) != ncclSuccess) {
    return r;
  }
  if ((r = CheckBuffer(api, c, "recvbuff", recv, recv_bytes)) != ncclSuccess) return r;
  auto op = std::make_unique<CollectiveOp>();
  op->kind = kind;
  op->send = static_cast<const char*>(send);
  op->recv = static_cast<char*>(recv);
  op->count = count;
  op->dtype = dtype;
  op->redop = redop;
  op->root = root;
  op->sig = {c->coll_seq++,
             count,
             kind,
             static_cast<int32_t>(dtype),
             kind == kAllReduce || kind == kReduceScatter ? static_cast<int32_t>(redop) : 0,
             kind == kBroadcast ? root : 0};
  const size_t slot_elems = c->seg.coll_slot_bytes() / es;
  op->per_chunk = std::max<size_t>(1, kind == kReduceScatter ? slot_elems / n : slot_elems);
  op->what = absl::StrFormat("%s #%d (%d x %s)", api, op->sig.seq, count, TypeName(dtype));
  if (count == 0) return ncclSuccess;  // Every rank skips it alike.
  return Submit(c, std::move(op), stream);
}

ncclResult_t PointToPoint(const char* api, bool is_send, const void* buf, size_t count,
                          ncclDataType_t dtype, int peer, ncclComm* c, cudaStream_t stream) {
  ncclResult_t r = CheckCall(api, c, dtype, stream);
  if (r != ncclSuccess) return r;
  if (peer < 0 || peer >= c->nranks) {
    return Error(c, ncclInvalidArgument,
                 absl::StrFormat("%s: peer %d outside [0, %d)", api, peer, c->nranks));
  }
  const size_t bytes = count * TypeBytes(dtype);
  if ((r = CheckBuffer(api, c, is_send ? "sendbuff" : "recvbuff", buf, bytes)) != ncclSuccess) {
    return r;
  }
  if (bytes == 0) return ncclSuccess;
  auto op = std::make_unique<P2POp>();
  op->collective = false;
  op->is_send = is_send;
  op->peer = peer;
  op->send = static_cast<const char*>(buf);
  op->recv = static_cast<char*>(const_cast<void*>(buf));
  op->bytes = bytes;
  op->what = absl::StrFormat("%s %s rank %d (%d x %s)", api, is_send ? "to" : "from", peer, count,
                             TypeName(dtype));
  return Submit(c, std::move(op), stream);
}

// Joins communicator `id` as `rank`; waits for all ranks only when `wait` is set.
ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, bool blocking,
                      bool wait) {
  if (out == nullptr) return Error(nullptr, ncclInvalidArgument, "ncclCommInitRank: null comm");
  *out = nullptr;
  if (nranks < 1 || nranks > cuda_emu::nccl::kMaxRanks || rank < 0 || rank >= nranks) {
    return Error(nullptr, ncclInvalidArgument,
                 absl::StrFormat("ncclCommInitRank: rank %d of %d (the stand-in allows 1..%d "
                                 "ranks)",
                                 rank, nranks, cuda_emu::nccl::kMaxRanks));
  }
  if (std::strncmp(id.internal, kIdPrefix, sizeof(kIdPrefix) - 1) != 0) {
    return Error(nullptr, ncclInvalidArgument,
                 "ncclCommInitRank: the unique id was not made by this stand-in's ncclGetUniqueId");
  }
  auto c = std::make_unique<ncclComm>();
  c->name = std::string(
      id.internal + sizeof(kIdPrefix) - 1,
      strnlen(id.internal + sizeof(kIdPrefix) - 1, sizeof(id.internal) - sizeof(kIdPrefix) + 1));
  c->nranks = nranks;
  c->rank = rank;
  c->device = cuda_emu::CurrentDevice();
  c->blocking = blocking;
  c->init_start = Clock::now();
  const std::string err = c->seg.Open(c->name, nranks, c->init_start + Timeout());
  if (!err.empty()) return Error(nullptr, ncclSystemError, absl::StrCat("ncclCommInitRank: ", err));
  auto& slot = c->hdr().ranks[rank];
  int32_t expected = cuda_emu::nccl::kFree;
  if (!slot.state.compare_exchange_strong(expected, cuda_emu::nccl::kJoined)) {
    return Error(nullptr, ncclInvalidUsage,
                 absl::StrFormat("ncclCommInitRank: rank %d of communicator %s joined twice", rank,
                                 c->name));
  }
  slot.pid.store(getpid(), std::memory_order_release);
  if (c->hdr().joined.fetch_add(1, std::memory_order_acq_rel) + 1 == nranks) c->seg.Unlink();
  *out = c.release();
  if (!wait) return ncclSuccess;
  if (!blocking) {
    const ncclResult_t r = ProgressComm(*out);
    return r == ncclSuccess ? ncclSuccess : r;
  }
  return Drive({*out});
}

// Marks this rank gone (peers waiting for it fail at once) and frees it.
void Release(ncclComm* c, cuda_emu::nccl::RankStateValue state) {
  if (c->hdr().joined.load(std::memory_order_acquire) < c->nranks) c->seg.Unlink();
  c->hdr().ranks[c->rank].state.store(state, std::memory_order_release);
  c->alive->store(false, std::memory_order_release);
  delete c;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Error(nullptr, ncclInvalidArgument, "ncclGetVersion: null");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return Error(nullptr, ncclInvalidArgument, "ncclGetUniqueId: null");
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t salt = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  std::memset(id->internal, 0, sizeof(id->internal));
  const std::string s =
      absl::StrFormat("%s/ncclemu-%d-%d-%016x", kIdPrefix, getpid(), counter.fetch_add(1), salt);
  std::memcpy(id->internal, s.data(), std::min(s.size(), sizeof(id->internal) - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (t_group_depth > 0) {  // Joined now, waited for at the group's end.
    const ncclResult_t r = InitRank(comm, nranks, id, rank, /*blocking=*/true, /*wait=*/false);
    if (r == ncclSuccess) t_group_inits.push_back(*comm);
    return r;
  }
  return InitRank(comm, nranks, id, rank, /*blocking=*/true, /*wait=*/true);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  const bool blocking =
      config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  if (t_group_depth > 0) {
    const ncclResult_t r = InitRank(comm, nranks, id, rank, blocking, /*wait=*/false);
    if (r == ncclSuccess) t_group_inits.push_back(*comm);
    return r;
  }
  return InitRank(comm, nranks, id, rank, blocking, /*wait=*/true);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) {
    return Error(nullptr, ncclInvalidArgument, "ncclCommInitAll: null comms or ndev < 1");
  }
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  const int saved = cuda_emu::CurrentDevice();
  std::vector<ncclComm*> all;
  ncclResult_t r = ncclSuccess;
  for (int i = 0; i < ndev && r == ncclSuccess; ++i) {
    if (cudaSetDevice(devlist == nullptr ? i : devlist[i]) != cudaSuccess) {
      r = Error(nullptr, ncclUnhandledCudaError, "ncclCommInitAll: cudaSetDevice failed");
      break;
    }
    r = InitRank(&comms[i], ndev, id, i, /*blocking=*/true, /*wait=*/false);
    if (r == ncclSuccess) all.push_back(comms[i]);
  }
  cudaSetDevice(saved);
  if (r == ncclSuccess) r = Drive(all);
  if (r != ncclSuccess) {
    for (ncclComm* c : all) Release(c, cuda_emu::nccl::kAborted);
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
  }
  return r;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return Error(nullptr, ncclInvalidArgument, "ncclCommFinalize: null");
  if (comm->blocking) return Drive({comm});
  return ProgressComm(comm);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Release(comm, cuda_emu::nccl::kLeft);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Release(comm, cuda_emu::nccl::kAborted);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr || error == nullptr) {
    return Error(nullptr, ncclInvalidArgument, "ncclCommGetAsyncError: null argument");
  }
  *error = ProgressComm(comm);  // Non-blocking communicators advance here.
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (comm != nullptr && !comm->last_error.empty()) return comm->last_error.c_str();
  return ThreadLastError().c_str();
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) {
    return Error(nullptr, ncclInvalidArgument, "ncclCommCount: null argument");
  }
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) {
    return Error(nullptr, ncclInvalidArgument, "ncclCommCuDevice: null argument");
  }
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) {
    return Error(nullptr, ncclInvalidArgument, "ncclCommUserRank: null argument");
  }
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Collective("ncclAllReduce", kAllReduce, send, recv, count, dtype, op, 0, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t dtype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Collective("ncclReduceScatter", kReduceScatter, send, recv, recvcount, dtype, op, 0, comm,
                    stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t dtype,
                           ncclComm_t comm, cudaStream_t stream) {
  return Collective("ncclAllGather", kAllGather, send, recv, sendcount, dtype, ncclSum, 0, comm,
                    stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  return Collective("ncclBroadcast", kBroadcast, send, recv, count, dtype, ncclSum, root, comm,
                    stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t dtype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPoint("ncclSend", true, send, count, dtype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return PointToPoint("ncclRecv", false, recv, count, dtype, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) {
    return Error(nullptr, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  }
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<ncclComm*> comms = std::move(t_group_inits);
  t_group_inits.clear();
  bool blocking = false;
  for (ncclComm* c : comms) blocking |= c->blocking;
  // Lazy streams: a group whose calls share one communicator and one stream (the common case:
  // an all-to-all's sends and receives) is queued on that stream as one piece of work. Others
  // (several communicators or streams in one group) run at the group's end, after their streams.
  std::vector<Deferred> deferred = std::move(t_deferred);
  t_deferred.clear();
  if (comms.empty() && !deferred.empty() &&
      cuda_emu::nccl::QueuedOnStream(deferred.front().stream) &&
      std::all_of(deferred.begin(), deferred.end(), [&](const Deferred& d) {
        return d.comm == deferred.front().comm && d.stream == deferred.front().stream;
      })) {
    std::vector<std::unique_ptr<Op>> ops;
    for (Deferred& d : deferred) ops.push_back(std::move(d.op));
    cuda_emu::nccl::EnqueueOnStream(deferred.front().comm, std::move(ops), deferred.front().stream);
    return ncclSuccess;
  }
  for (Deferred& d : deferred) {
    if (cuda_emu::nccl::QueuedOnStream(d.stream)) cudaStreamSynchronize(d.stream);
  }
  for (Deferred& d : deferred) {
    ncclComm* c = d.comm;
    if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
    blocking |= c->blocking;
    c->pending.push_back(std::move(d.op));
  }
  if (blocking) return Drive(comms);
  ncclResult_t result = ncclSuccess;
  for (ncclComm* c : comms) {
    const ncclResult_t r = ProgressComm(c);
    if (r != ncclSuccess && r != ncclInProgress) return r;
    if (r == ncclInProgress) result = ncclInProgress;
  }
  return result;
}
