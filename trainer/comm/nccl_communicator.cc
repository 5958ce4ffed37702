#include "trainer/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "trainer/comm/nccl_status.h"

namespace ringmaster::trainer {
namespace {

using nccl_internal::Backoff;
using nccl_internal::CudaStatus;
using nccl_internal::InProgress;
using nccl_internal::NcclStatus;
using nccl_internal::NcclType;

constexpr char kUniqueIdKey[] = "nccl_unique_id";

// Returns a done Work carrying `expr`'s status when that is an error.
#define RM_RETURN_WORK_IF_ERROR(expr)                           \
  do {                                                          \
    absl::Status rm_status_ = (expr);                           \
    if (!rm_status_.ok()) return MakeCompletedWork(rm_status_); \
  } while (0)

// What the communicator and the Works it hands out share: the NCCL handle (which a failing
// Work aborts), the first failure, and the identity that error messages carry. A Work may be
// waited for on any thread, so everything here is guarded by `mu`.
struct NcclShared {
  NcclShared(int rank, int size, int device, absl::Duration timeout)
      : rank(rank), size(size), device(device), timeout(timeout) {}

  const int rank;
  const int size;
  const int device;
  const absl::Duration timeout;
  std::mutex mu;
  ncclComm_t comm = nullptr;  // null once aborted or destroyed
  absl::Status failure;       // first failure; OK while healthy

  // Aborts the NCCL communicator (which also stops its kernels). Requires `mu`.
  void AbortLocked() {
    if (comm == nullptr) return;
    (void)cudaSetDevice(device);
    (void)ncclCommAbort(comm);  // Nothing more to do if even the abort fails.
    comm = nullptr;
  }

  // Records the first failure of operation `op` #`seq` and aborts. Requires `mu`.
  absl::Status FailLocked(const std::string& op, uint64_t seq, DataType type, size_t bytes,
                          const absl::Status& s) {
    if (failure.ok()) {
      failure = absl::Status(
          s.code(),
          absl::StrFormat("NCCL %s #%d on rank %d of %d (device %d, %d bytes of %s, timeout "
                          "%s) failed: %s; communicator aborted",
                          op, seq, rank, size, device, bytes, DataTypeName(type),
                          absl::FormatDuration(timeout), std::string(s.message())));
      AbortLocked();
      return failure;
    }
    // An earlier operation failed (and aborted) while this one was pending.
    return absl::FailedPreconditionError(absl::StrFormat(
        "NCCL %s #%d on rank %d of %d: communicator aborted by an earlier failure: %s", op, seq,
        rank, size, std::string(failure.message())));
  }

  // One poll of the communicator's asynchronous state: OK, InProgress (as `*in_progress`), or
  // the error NCCL reports (e.g. a peer's socket closed). Requires `mu` and a live `comm`.
  absl::Status PollAsyncLocked(bool* in_progress) {
    ncclResult_t state = ncclSuccess;
    RM_RETURN_IF_ERROR(RM_NCCL_STATUS(comm, ncclCommGetAsyncError(comm, &state)));
    *in_progress = InProgress(state);
    if (state != ncclSuccess && !*in_progress) {
      return NcclStatus(state, comm, "asynchronous error (ncclCommGetAsyncError)", __FILE__,
                        __LINE__);
    }
    return absl::OkStatus();
  }

  // Waits until a non-blocking communicator has finished issuing the last call (it reports
  // ncclInProgress until then; nothing else may be called or recorded meanwhile), or fails
  // with DeadlineExceeded at `deadline`. Requires `mu` and a live `comm`.
  absl::Status AwaitIssuedLocked(absl::Time deadline) {
    Backoff backoff;
    while (true) {
      bool in_progress = false;
      RM_RETURN_IF_ERROR(PollAsyncLocked(&in_progress));
      if (!in_progress) return absl::OkStatus();
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("did not complete within ", absl::FormatDuration(timeout)));
      }
      backoff.Pause();
    }
  }
};

// One enqueued operation: done when the CUDA event recorded after it on its stream has
// completed. Wait polls the event and NCCL's asynchronous error state, and past the timeout (or
// on an error) aborts the communicator, so that a lost peer becomes a Status naming the
// operation instead of a hang.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclShared> shared, cudaEvent_t event, const char* op, uint64_t seq,
           DataType type, size_t bytes, absl::Time issued)
      : shared_(std::move(shared)),
        event_(event),
        op_(op),
        seq_(seq),
        type_(type),
        bytes_(bytes),
        issued_(issued) {}

  // No cudaSetDevice: an event can be destroyed with any device current, and the destroying
  // thread's device is left alone.
  ~NcclWork() override { (void)cudaEventDestroy(event_); }

  absl::Status Wait() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return status_;
    }
    // The deadline runs from when the op was issued, or from now when the waiter comes late:
    // work queued ahead of it on a busy stream must not count against the collective.
    const absl::Time deadline = std::max(issued_, absl::Now()) + shared_->timeout;
    Backoff backoff;
    while (true) {
      std::optional<absl::Status> s = Poll(deadline);
      if (s.has_value()) return Finish(*s);
      backoff.Pause();
    }
  }

  bool IsDone() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return true;
    }
    std::optional<absl::Status> s = Poll(absl::InfiniteFuture());
    if (!s.has_value()) return false;
    Finish(*s).IgnoreError();  // kept in status_
    return true;
  }

 private:
  // One check: the final status, or nullopt while the operation is still running.
  std::optional<absl::Status> Poll(absl::Time deadline) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) {
      return shared_->FailLocked(op_, seq_, type_, bytes_,
                                 CudaStatus(e, "cudaEventQuery", __FILE__, __LINE__));
    }
    if (shared_->comm == nullptr) {
      // Aborted by another operation's failure (the event may never complete), or destroyed
      // (finalised: the event completes without NCCL's help).
      if (!shared_->failure.ok()) return shared_->FailLocked(op_, seq_, type_, bytes_, {});
    } else {
      bool in_progress = false;
      absl::Status s = shared_->PollAsyncLocked(&in_progress);
      if (!s.ok()) return shared_->FailLocked(op_, seq_, type_, bytes_, s);
    }
    if (absl::Now() >= deadline) {
      return shared_->FailLocked(
          op_, seq_, type_, bytes_,
          absl::DeadlineExceededError(
              absl::StrCat("did not complete within ", absl::FormatDuration(shared_->timeout))));
    }
    return std::nullopt;
  }

  absl::Status Finish(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      done_ = true;
      status_ = s;
    }
    return status_;
  }

  const std::shared_ptr<NcclShared> shared_;
  const cudaEvent_t event_;
  const char* const op_;
  const uint64_t seq_;
  const DataType type_;
  const size_t bytes_;
  const absl::Time issued_;
  std::mutex mu_;
  bool done_ = false;
  absl::Status status_;
};

class NcclCommunicatorImpl : public Communicator {
 public:
  NcclCommunicatorImpl(int rank, int size, int device, absl::Duration timeout)
      : shared_(std::make_shared<NcclShared>(rank, size, device, timeout)) {}

  NcclCommunicatorImpl(const NcclCommunicatorImpl&) = delete;
  NcclCommunicatorImpl& operator=(const NcclCommunicatorImpl&) = delete;

  ~NcclCommunicatorImpl() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    (void)cudaSetDevice(shared_->device);
    if (shared_->comm != nullptr) {
#if RM_NCCL_NONBLOCKING
      // Flush outstanding work so peers are not left mid-collective; a peer that is gone makes
      // the flush time out, and the abort then frees the communicator regardless.
      const bool flushed = RM_NCCL_STATUS(shared_->comm, ncclCommFinalize(shared_->comm)).ok() &&
                           shared_->AwaitIssuedLocked(absl::Now() + shared_->timeout).ok();
      if (flushed) {
        (void)ncclCommDestroy(shared_->comm);
        shared_->comm = nullptr;
      } else {
        shared_->AbortLocked();
      }
#else
      (void)ncclCommDestroy(shared_->comm);
      shared_->comm = nullptr;
#endif
    }
    if (barrier_word_ != nullptr) (void)cudaFree(barrier_word_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  // Creates the stream and the barrier's device word, then joins the NCCL communicator `id`
  // names. Aborts the half-built communicator on failure; the destructor frees the rest.
  absl::Status Init(const ncclUniqueId& id, absl::Time deadline) {
    NcclShared& sh = *shared_;
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaSetDevice(sh.device)));
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaMalloc(&barrier_word_, sizeof(float))));
    // Zero stays zero under summation, so Barrier never needs to reset it.
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaMemset(barrier_word_, 0, sizeof(float))));
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaStreamSynchronize(nullptr)));  // the memset
    std::lock_guard<std::mutex> lock(sh.mu);
#if RM_NCCL_NONBLOCKING
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // Lets initialisation and every collective be polled and aborted.
    absl::Status s =
        RM_NCCL_STATUS(nullptr, ncclCommInitRankConfig(&sh.comm, sh.size, id, sh.rank, &config));
#else
    // Limitation before NCCL 2.14: blocking initialisation, unbounded if a rank never joins.
    absl::Status s = RM_NCCL_STATUS(nullptr, ncclCommInitRank(&sh.comm, sh.size, id, sh.rank));
#endif
    if (s.ok() && sh.comm == nullptr) s = absl::InternalError("NCCL returned a null communicator");
    if (s.ok()) {
      s = sh.AwaitIssuedLocked(deadline);
      if (absl::IsDeadlineExceeded(s)) {
        s = absl::DeadlineExceededError(absl::StrFormat(
            "NCCL initialisation did not complete within %s (are all %d ranks up and "
            "reachable?); communicator aborted",
            absl::FormatDuration(sh.timeout), sh.size));
      }
    }
    if (!s.ok()) sh.AbortLocked();
    return s;
  }

  int rank() const override { return shared_->rank; }
  int size() const override { return shared_->size; }

  std::shared_ptr<Work> AllReduceSumAsync(void* data, size_t count, DataType type,
                                          CommStream stream) override {
    const size_t bytes = count * DataTypeSize(type);
    RM_RETURN_WORK_IF_ERROR(CheckSummable("NCCL", "AllReduceSum", rank(), type));
    RM_RETURN_WORK_IF_ERROR(CheckDeviceBuffer("AllReduceSum", "data", data, bytes));
    const absl::StatusOr<ncclDataType_t> nt = NcclType(type);  // before Run: not a failure
    RM_RETURN_WORK_IF_ERROR(nt.status());
    const ncclDataType_t t = *nt;
    return Run("AllReduceSum", type, bytes, stream, [&](ncclComm_t comm, cudaStream_t st) {
      return RM_NCCL_STATUS(comm, ncclAllReduce(data, data, count, t, ncclSum, comm, st));
    });
  }

  std::shared_ptr<Work> ReduceScatterSumAsync(const void* in, void* out, size_t count_per_rank,
                                              DataType type, CommStream stream) override {
    const size_t out_bytes = count_per_rank * DataTypeSize(type);
    const size_t in_bytes = out_bytes * static_cast<size_t>(size());
    RM_RETURN_WORK_IF_ERROR(CheckSummable("NCCL", "ReduceScatterSum", rank(), type));
    RM_RETURN_WORK_IF_ERROR(CheckInOut("ReduceScatterSum", in, in_bytes, out, out_bytes));
    const absl::StatusOr<ncclDataType_t> nt = NcclType(type);
    RM_RETURN_WORK_IF_ERROR(nt.status());
    const ncclDataType_t t = *nt;
    return Run("ReduceScatterSum", type, in_bytes, stream, [&](ncclComm_t comm, cudaStream_t st) {
      return RM_NCCL_STATUS(comm, ncclReduceScatter(in, out, count_per_rank, t, ncclSum, comm, st));
    });
  }

  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count_per_rank,
                                       DataType type, CommStream stream) override {
    const size_t in_bytes = count_per_rank * DataTypeSize(type);
    const size_t out_bytes = in_bytes * static_cast<size_t>(size());
    const char* op = type == DataType::kBytes ? "AllGatherBytes" : "AllGather";
    RM_RETURN_WORK_IF_ERROR(CheckInOut(op, in, in_bytes, out, out_bytes));
    return Run(op, type, out_bytes, stream, [&](ncclComm_t comm, cudaStream_t st) {
      // A gather moves bits: bytes serve every type (and need no bf16 support).
      return RM_NCCL_STATUS(comm, ncclAllGather(in, out, in_bytes, ncclUint8, comm, st));
    });
  }

  std::shared_ptr<Work> AllToAllAsync(const void* in, void* out, size_t count_per_rank,
                                      DataType type, CommStream stream) override {
    const size_t bytes_per_rank = count_per_rank * DataTypeSize(type);
    const size_t bytes = bytes_per_rank * static_cast<size_t>(size());
    RM_RETURN_WORK_IF_ERROR(CheckInOut("AllToAll", in, bytes, out, bytes));
    return Run("AllToAll", type, bytes, stream, [&](ncclComm_t comm, cudaStream_t st) {
      // One group, so NCCL schedules all 2*size() transfers together instead of deadlocking
      // on the first blocking pair.
      const auto* src = static_cast<const uint8_t*>(in);
      auto* dst = static_cast<uint8_t*>(out);
      absl::Status s = RM_NCCL_STATUS(comm, ncclGroupStart());
      if (!s.ok()) return s;
      for (int peer = 0; peer < size() && s.ok(); ++peer) {
        const size_t offset = bytes_per_rank * static_cast<size_t>(peer);
        s = RM_NCCL_STATUS(comm, ncclSend(src + offset, bytes_per_rank, ncclUint8, peer, comm, st));
        if (s.ok()) {
          s = RM_NCCL_STATUS(comm,
                             ncclRecv(dst + offset, bytes_per_rank, ncclUint8, peer, comm, st));
        }
      }
      absl::Status end = RM_NCCL_STATUS(comm, ncclGroupEnd());  // Always close the group.
      return s.ok() ? end : s;
    });
  }

  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                       CommStream stream) override {
    if (root < 0 || root >= size()) {
      return MakeCompletedWork(absl::InvalidArgumentError(absl::StrFormat(
          "NCCL Broadcast on rank %d: root %d outside [0, %d)", rank(), root, size())));
    }
    const size_t bytes = count * DataTypeSize(type);
    RM_RETURN_WORK_IF_ERROR(CheckDeviceBuffer("Broadcast", "data", data, bytes));
    return Run("Broadcast", type, bytes, stream, [&](ncclComm_t comm, cudaStream_t st) {
      // In place: the root's buffer is both its input and its output.
      return RM_NCCL_STATUS(comm, ncclBroadcast(data, data, bytes, ncclUint8, root, comm, st));
    });
  }

  std::shared_ptr<Work> BarrierAsync(CommStream stream) override {
    return Run("Barrier", DataType::kFloat32, sizeof(float), stream,
               [&](ncclComm_t comm, cudaStream_t st) {
                 return RM_NCCL_STATUS(comm, ncclAllReduce(barrier_word_, barrier_word_, 1,
                                                           ncclFloat, ncclSum, comm, st));
               });
  }

 private:
  // Rejects what NCCL would turn into a crash or a poisoned CUDA context instead of an error:
  // a null pointer, host memory, or memory of another device.
  absl::Status CheckDeviceBuffer(const char* op, const char* name, const void* p,
                                 size_t bytes) const {
    if (bytes == 0) return absl::OkStatus();
    if (p == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: %s is null (%d bytes)", op, rank(), name, bytes));
    }
    // Select our device first: querying on a thread that has not chosen one would create a
    // context on device 0 just for this check.
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaSetDevice(shared_->device)));
    cudaPointerAttributes attr;
    const cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // Not sticky; clear it so later calls do not report it.
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: %s (%p) is not a CUDA device pointer: %s", op,
                          rank(), name, p, cudaGetErrorString(e)));
    }
    if (attr.type == cudaMemoryTypeManaged) return absl::OkStatus();
    if (attr.type != cudaMemoryTypeDevice) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NCCL %s on rank %d: %s (%p) is host memory; NcclCommunicator takes device pointers", op,
          rank(), name, p));
    }
    if (attr.device != shared_->device) {
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: %s (%p) lives on device %d, the communicator on %d",
                          op, rank(), name, p, attr.device, shared_->device));
    }
    return absl::OkStatus();
  }

  absl::Status CheckInOut(const char* op, const void* in, size_t in_bytes, const void* out,
                          size_t out_bytes) const {
    RM_RETURN_IF_ERROR(CheckDeviceBuffer(op, "in", in, in_bytes));
    RM_RETURN_IF_ERROR(CheckDeviceBuffer(op, "out", out, out_bytes));
    if (in_bytes == 0 || out_bytes == 0) return absl::OkStatus();
    const auto a = reinterpret_cast<uintptr_t>(in);
    const auto b = reinterpret_cast<uintptr_t>(out);
    if (a < b + out_bytes && b < a + in_bytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: in (%p, %d bytes) and out (%p, %d bytes) overlap",
                          op, rank(), in, in_bytes, out, out_bytes));
    }
    return absl::OkStatus();
  }

  // Issues one operation: assigns its sequence number (ranks match ops by issue order, as NCCL
  // requires), enqueues it on `stream` (or the communicator's own), waits only until NCCL has
  // finished issuing it, and records an event after it. The stream is not synchronised: the
  // returned Work completes with the event. A failure to issue aborts the NCCL communicator and
  // poisons this one.
  template <typename Enqueue>
  std::shared_ptr<Work> Run(const char* op, DataType type, size_t bytes, CommStream stream,
                            Enqueue&& enqueue) {
    NcclShared& sh = *shared_;
    const uint64_t seq = next_seq_++;
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.failure.ok()) {
      return MakeCompletedWork(absl::FailedPreconditionError(absl::StrFormat(
          "NCCL %s #%d on rank %d of %d: communicator unusable after an earlier failure: %s", op,
          seq, sh.rank, sh.size, std::string(sh.failure.message()))));
    }
    if (bytes == 0) return MakeCompletedWork(absl::OkStatus());
    const absl::Time issued = absl::Now();
    cudaStream_t st = stream.is_default() ? stream_ : static_cast<cudaStream_t>(stream.handle());
    cudaEvent_t event = nullptr;
    // The caller's thread (e.g. CommQueue's worker) may not have selected our device yet.
    absl::Status s = RM_CUDA_STATUS(cudaSetDevice(sh.device));
    if (s.ok()) s = enqueue(sh.comm, st);
    if (s.ok()) s = sh.AwaitIssuedLocked(issued + sh.timeout);
    if (s.ok()) s = RM_CUDA_STATUS(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    if (s.ok()) s = RM_CUDA_STATUS(cudaEventRecord(event, st));
    if (s.ok()) {
      return std::make_shared<NcclWork>(shared_, event, op, seq, type, bytes, issued);
    }
    if (event != nullptr) (void)cudaEventDestroy(event);
    return MakeCompletedWork(sh.FailLocked(op, seq, type, bytes, s));
  }

  const std::shared_ptr<NcclShared> shared_;
  cudaStream_t stream_ = nullptr;  // Non-blocking: does not serialise with the legacy stream.
  float* barrier_word_ = nullptr;  // One device float, always 0; Barrier all-reduces it.
  uint64_t next_seq_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Create(Store& store, int rank,
                                                                       int size, int device,
                                                                       absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NcclCommunicator: rank %d outside [0, size=%d)", rank, size));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NcclCommunicator: timeout must be positive, got ", absl::FormatDuration(timeout)));
  }
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "NcclCommunicator: no usable CUDA device: cudaGetDeviceCount: ", cudaGetErrorString(e)));
  }
  if (device < 0 || device >= devices) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NcclCommunicator: device %d outside [0, %d) on rank %d", device, devices, rank));
  }
  const absl::Time deadline = absl::Now() + timeout;
  const std::string where = absl::StrFormat(
      "NcclCommunicator rendezvous of rank %d of %d on device %d", rank, size, device);

  ncclUniqueId id;
  if (rank == 0) {
    absl::Status s = RM_NCCL_STATUS(nullptr, ncclGetUniqueId(&id));
    if (s.ok()) s = store.Set(kUniqueIdKey, std::string(id.internal, sizeof(id.internal)));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, " failed: ", s.message()));
  } else {
    absl::StatusOr<std::string> v =
        store.Get(kUniqueIdKey, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!v.ok()) {
      return absl::Status(v.status().code(),
                          absl::StrCat(where, " failed: ", v.status().message()));
    }
    if (v->size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrFormat("%s failed: key '%s' holds %d bytes, expected %d",
                                                 where, kUniqueIdKey, v->size(),
                                                 sizeof(id.internal)));
    }
    std::memcpy(id.internal, v->data(), sizeof(id.internal));
  }

  auto comm = std::make_unique<NcclCommunicatorImpl>(rank, size, device, timeout);
  absl::Status s = comm->Init(id, deadline);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(where, " failed: ", s.message()));
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace ringmaster::trainer
