#include "trainer/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

// NCCL feature levels this file adapts to. Point-to-point (AllToAll) needs 2.7; non-blocking
// communicators (bounded initialisation, ncclCommFinalize, ncclInProgress) arrived in 2.14;
// ncclGetLastError and ncclRemoteError in 2.13.
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 7, 0)
#error "NcclCommunicator needs NCCL >= 2.7 (ncclSend/ncclRecv)"
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define RM_NCCL_NONBLOCKING 1
#else
#define RM_NCCL_NONBLOCKING 0
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
#define RM_NCCL_HAS_LAST_ERROR 1
#else
#define RM_NCCL_HAS_LAST_ERROR 0
#endif

namespace ringmaster::trainer {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash == nullptr ? path : slash + 1;
}

bool InProgress(ncclResult_t r) {
#if RM_NCCL_NONBLOCKING
  return r == ncclInProgress;
#else
  (void)r;
  return false;
#endif
}

// A lost or unreachable peer (socket/system failures, a remote rank's error) is Unavailable,
// like a reset connection in the Gloo backend; everything else is a local bug or CUDA failure.
absl::StatusCode CodeForNcclError(ncclResult_t r) {
  switch (r) {
    case ncclSystemError:
#if RM_NCCL_HAS_LAST_ERROR
    case ncclRemoteError:
#endif
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

// OK for ncclSuccess and (non-blocking communicators) ncclInProgress; otherwise an error
// carrying the call, file:line, NCCL's error string and its last-error text. `comm` may be
// null.
absl::Status NcclStatus(ncclResult_t r, ncclComm_t comm, const char* call, const char* file,
                        int line) {
  if (r == ncclSuccess || InProgress(r)) return absl::OkStatus();
  std::string msg =
      absl::StrFormat("%s at %s:%d: %s", call, Basename(file), line, ncclGetErrorString(r));
#if RM_NCCL_HAS_LAST_ERROR
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&msg, " (last NCCL error: ", last, ")");
#else
  (void)comm;
#endif
  return absl::Status(CodeForNcclError(r), msg);
}

absl::Status CudaStatus(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s at %s:%d: %s: %s", call, Basename(file), line,
                                             cudaGetErrorName(e), cudaGetErrorString(e)));
}

#define RM_NCCL_STATUS(comm, call) NcclStatus((call), (comm), #call, __FILE__, __LINE__)
#define RM_CUDA_STATUS(call) CudaStatus((call), #call, __FILE__, __LINE__)

// Polling cadence while waiting on NCCL: yield for the first 100us (small collectives finish in
// tens of microseconds), then sleep with a doubling interval capped at 1ms, which bounds the
// added latency of a large collective to ~1ms and keeps the waiting thread off the core.
class Backoff {
 public:
  void Pause() {
    if (absl::Now() - start_ < absl::Microseconds(100)) {
      std::this_thread::yield();
      return;
    }
    sleep_ = std::min(std::max(sleep_ * 2, absl::Microseconds(10)), absl::Milliseconds(1));
    absl::SleepFor(sleep_);
  }

 private:
  absl::Time start_ = absl::Now();
  absl::Duration sleep_ = absl::ZeroDuration();
};

class NcclCommunicatorImpl : public Communicator {
 public:
  NcclCommunicatorImpl(int rank, int size, int device, absl::Duration timeout)
      : rank_(rank), size_(size), device_(device), timeout_(timeout) {}

  NcclCommunicatorImpl(const NcclCommunicatorImpl&) = delete;
  NcclCommunicatorImpl& operator=(const NcclCommunicatorImpl&) = delete;

  ~NcclCommunicatorImpl() override {
    (void)cudaSetDevice(device_);
    if (comm_ != nullptr) {
#if RM_NCCL_NONBLOCKING
      // Flush outstanding work so peers are not left mid-collective; a peer that is gone makes
      // the flush time out, and the abort then frees the communicator regardless.
      const bool flushed = RM_NCCL_STATUS(comm_, ncclCommFinalize(comm_)).ok() &&
                           AwaitCompletion(absl::Now() + timeout_).ok();
      if (flushed) {
        (void)ncclCommDestroy(comm_);
      } else {
        (void)ncclCommAbort(comm_);
      }
#else
      (void)ncclCommDestroy(comm_);
#endif
      comm_ = nullptr;
    }
    if (barrier_word_ != nullptr) (void)cudaFree(barrier_word_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  // Creates the stream and the barrier's device word, then joins the NCCL communicator `id`
  // names. Aborts the half-built communicator on failure; the destructor frees the rest.
  absl::Status Init(const ncclUniqueId& id, absl::Time deadline) {
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaSetDevice(device_)));
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaMalloc(&barrier_word_, sizeof(float))));
    // Zero stays zero under summation, so Barrier never needs to reset it.
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaMemset(barrier_word_, 0, sizeof(float))));
#if RM_NCCL_NONBLOCKING
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // Lets initialisation and every collective be polled and aborted.
    absl::Status s =
        RM_NCCL_STATUS(nullptr, ncclCommInitRankConfig(&comm_, size_, id, rank_, &config));
#else
    // Limitation before NCCL 2.14: blocking initialisation, unbounded if a rank never joins.
    absl::Status s = RM_NCCL_STATUS(nullptr, ncclCommInitRank(&comm_, size_, id, rank_));
#endif
    if (s.ok() && comm_ == nullptr) s = absl::InternalError("NCCL returned a null communicator");
    if (s.ok()) {
      s = AwaitCompletion(deadline);
      if (absl::IsDeadlineExceeded(s)) {
        s = absl::DeadlineExceededError(absl::StrFormat(
            "NCCL initialisation did not complete within %s (are all %d ranks up and "
            "reachable?); communicator aborted",
            absl::FormatDuration(timeout_), size_));
      }
    }
    if (!s.ok()) Abort();
    return s;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(float* data, size_t n) override {
    const size_t bytes = n * sizeof(float);
    RM_RETURN_IF_ERROR(CheckDeviceBuffer("AllReduceSum", "data", data, bytes));
    return Run("AllReduceSum", bytes, [&] {
      return RM_NCCL_STATUS(comm_,
                            ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_));
    });
  }

  absl::Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank) override {
    const size_t out_bytes = n_per_rank * sizeof(float);
    const size_t in_bytes = out_bytes * static_cast<size_t>(size_);
    RM_RETURN_IF_ERROR(CheckInOut("ReduceScatterSum", in, in_bytes, out, out_bytes));
    return Run("ReduceScatterSum", in_bytes, [&] {
      return RM_NCCL_STATUS(
          comm_, ncclReduceScatter(in, out, n_per_rank, ncclFloat, ncclSum, comm_, stream_));
    });
  }

  absl::Status AllGather(const float* in, float* out, size_t n_per_rank) override {
    const size_t in_bytes = n_per_rank * sizeof(float);
    const size_t out_bytes = in_bytes * static_cast<size_t>(size_);
    RM_RETURN_IF_ERROR(CheckInOut("AllGather", in, in_bytes, out, out_bytes));
    return Run("AllGather", out_bytes, [&] {
      return RM_NCCL_STATUS(comm_, ncclAllGather(in, out, n_per_rank, ncclFloat, comm_, stream_));
    });
  }

  absl::Status AllToAll(const void* in, void* out, size_t bytes_per_rank) override {
    const size_t bytes = bytes_per_rank * static_cast<size_t>(size_);
    RM_RETURN_IF_ERROR(CheckInOut("AllToAll", in, bytes, out, bytes));
    return Run("AllToAll", bytes, [&] {
      // One group, so NCCL schedules all 2*size() transfers together instead of deadlocking
      // on the first blocking pair.
      const auto* src = static_cast<const uint8_t*>(in);
      auto* dst = static_cast<uint8_t*>(out);
      absl::Status s = RM_NCCL_STATUS(comm_, ncclGroupStart());
      if (!s.ok()) return s;
      for (int peer = 0; peer < size_ && s.ok(); ++peer) {
        const size_t offset = bytes_per_rank * static_cast<size_t>(peer);
        s = RM_NCCL_STATUS(comm_,
                           ncclSend(src + offset, bytes_per_rank, ncclUint8, peer, comm_, stream_));
        if (s.ok()) {
          s = RM_NCCL_STATUS(
              comm_, ncclRecv(dst + offset, bytes_per_rank, ncclUint8, peer, comm_, stream_));
        }
      }
      absl::Status end = RM_NCCL_STATUS(comm_, ncclGroupEnd());  // Always close the group.
      return s.ok() ? end : s;
    });
  }

  absl::Status AllGatherBytes(const void* in, void* out, size_t bytes_per_rank) override {
    const size_t out_bytes = bytes_per_rank * static_cast<size_t>(size_);
    RM_RETURN_IF_ERROR(CheckInOut("AllGatherBytes", in, bytes_per_rank, out, out_bytes));
    return Run("AllGatherBytes", out_bytes, [&] {
      return RM_NCCL_STATUS(comm_,
                            ncclAllGather(in, out, bytes_per_rank, ncclUint8, comm_, stream_));
    });
  }

  absl::Status Broadcast(float* data, size_t n, int root) override {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NCCL Broadcast on rank %d: root %d outside [0, %d)", rank_, root, size_));
    }
    const size_t bytes = n * sizeof(float);
    RM_RETURN_IF_ERROR(CheckDeviceBuffer("Broadcast", "data", data, bytes));
    return Run("Broadcast", bytes, [&] {
      // In place: the root's buffer is both its input and its output.
      return RM_NCCL_STATUS(comm_, ncclBroadcast(data, data, n, ncclFloat, root, comm_, stream_));
    });
  }

  absl::Status Barrier() override {
    return Run("Barrier", sizeof(float), [&] {
      return RM_NCCL_STATUS(comm_, ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat,
                                                 ncclSum, comm_, stream_));
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
          absl::StrFormat("NCCL %s on rank %d: %s is null (%d bytes)", op, rank_, name, bytes));
    }
    // Select our device first: querying on a thread that has not chosen one would create a
    // context on device 0 just for this check.
    RM_RETURN_IF_ERROR(RM_CUDA_STATUS(cudaSetDevice(device_)));
    cudaPointerAttributes attr;
    const cudaError_t e = cudaPointerGetAttributes(&attr, p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // Not sticky; clear it so later calls do not report it.
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: %s (%p) is not a CUDA device pointer: %s", op, rank_,
                          name, p, cudaGetErrorString(e)));
    }
    if (attr.type == cudaMemoryTypeManaged) return absl::OkStatus();
    if (attr.type != cudaMemoryTypeDevice) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NCCL %s on rank %d: %s (%p) is host memory; NcclCommunicator takes device pointers", op,
          rank_, name, p));
    }
    if (attr.device != device_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("NCCL %s on rank %d: %s (%p) lives on device %d, the communicator on %d",
                          op, rank_, name, p, attr.device, device_));
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
                          op, rank_, in, in_bytes, out, out_bytes));
    }
    return absl::OkStatus();
  }

  // Waits until the communicator has finished enqueueing (non-blocking calls report
  // ncclInProgress until then) and the stream has drained. Fails on an asynchronous NCCL error
  // (e.g. a peer's socket closed), a CUDA error, or DeadlineExceeded at `deadline`.
  absl::Status AwaitCompletion(absl::Time deadline) {
    Backoff backoff;
    while (true) {
      ncclResult_t state = ncclSuccess;
      RM_RETURN_IF_ERROR(RM_NCCL_STATUS(comm_, ncclCommGetAsyncError(comm_, &state)));
      if (state != ncclSuccess && !InProgress(state)) {
        return NcclStatus(state, comm_, "asynchronous error (ncclCommGetAsyncError)", __FILE__,
                          __LINE__);
      }
      if (!InProgress(state)) {
        const cudaError_t e = cudaStreamQuery(stream_);
        if (e == cudaSuccess) return absl::OkStatus();
        if (e != cudaErrorNotReady) return CudaStatus(e, "cudaStreamQuery", __FILE__, __LINE__);
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("did not complete within ", absl::FormatDuration(timeout_)));
      }
      backoff.Pause();
    }
  }

  // Runs one collective: assigns its sequence number (ranks match ops by issue order, as NCCL
  // requires), enqueues it, waits for it within the timeout, and on any failure aborts the
  // NCCL communicator (which also stops its kernels) and poisons this one.
  template <typename Enqueue>
  absl::Status Run(const char* op, size_t bytes, Enqueue&& enqueue) {
    const uint64_t seq = next_seq_++;
    if (!failure_.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "NCCL %s #%d on rank %d of %d: communicator unusable after an earlier failure: %s", op,
          seq, rank_, size_, std::string(failure_.message())));
    }
    if (bytes == 0) return absl::OkStatus();
    const absl::Time deadline = absl::Now() + timeout_;
    // The caller's thread (e.g. CommQueue's worker) may not have selected our device yet.
    absl::Status s = RM_CUDA_STATUS(cudaSetDevice(device_));
    if (s.ok()) s = enqueue();
    if (s.ok()) s = AwaitCompletion(deadline);
    if (s.ok()) return s;
    failure_ = absl::Status(
        s.code(), absl::StrFormat("NCCL %s #%d on rank %d of %d (device %d, %d bytes, timeout "
                                  "%s) failed: %s; communicator aborted",
                                  op, seq, rank_, size_, device_, bytes,
                                  absl::FormatDuration(timeout_), std::string(s.message())));
    Abort();
    return failure_;
  }

  void Abort() {
    if (comm_ == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)ncclCommAbort(comm_);  // Nothing more to do if even the abort fails.
    comm_ = nullptr;
  }

  const int rank_;
  const int size_;
  const int device_;
  const absl::Duration timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // Non-blocking: does not serialise with the legacy stream.
  float* barrier_word_ = nullptr;  // One device float, always 0; Barrier all-reduces it.
  uint64_t next_seq_ = 0;
  absl::Status failure_;  // First failure; OK while healthy.
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
