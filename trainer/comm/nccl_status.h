// NCCL and CUDA results as absl::Status, the NCCL feature levels NcclCommunicator adapts to,
// and the polling cadence of its waits. Internal to nccl_communicator.cc (needs nccl.h and the
// CUDA runtime headers, which only the NCCL target sees).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer/comm/communicator.h"

// NCCL feature levels NcclCommunicator adapts to. Point-to-point (AllToAll) needs 2.7; non-blocking
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

namespace ringmaster::trainer::nccl_internal {

inline const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash == nullptr ? path : slash + 1;
}

inline bool InProgress(ncclResult_t r) {
#if RM_NCCL_NONBLOCKING
  return r == ncclInProgress;
#else
  (void)r;
  return false;
#endif
}

// A lost or unreachable peer (socket/system failures, a remote rank's error) is Unavailable,
// like a reset connection in the Gloo backend; everything else is a local bug or CUDA failure.
inline absl::StatusCode CodeForNcclError(ncclResult_t r) {
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
inline absl::Status NcclStatus(ncclResult_t r, ncclComm_t comm, const char* call, const char* file,
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

inline absl::Status CudaStatus(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s at %s:%d: %s: %s", call, Basename(file), line,
                                             cudaGetErrorName(e), cudaGetErrorString(e)));
}

#define RM_NCCL_STATUS(comm, call) \
  ::ringmaster::trainer::nccl_internal::NcclStatus((call), (comm), #call, __FILE__, __LINE__)
#define RM_CUDA_STATUS(call) \
  ::ringmaster::trainer::nccl_internal::CudaStatus((call), #call, __FILE__, __LINE__)

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

inline absl::StatusOr<ncclDataType_t> NcclType(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kBFloat16:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclBfloat16;
#else
      return absl::UnimplementedError("bf16 collectives need NCCL >= 2.10");
#endif
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kBytes:
      return ncclUint8;
  }
  return absl::InvalidArgumentError("unknown DataType");
}

}  // namespace ringmaster::trainer::nccl_internal
