#include "trainer/comm/gloo_communicator.h"

#include <net/if.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/attr.h"
#include "gloo/transport/tcp/device.h"
#include "trainer/comm/float16.h"

namespace ringmaster::trainer {
namespace {

// Returns a done Work carrying `expr`'s status when that is an error.
#define RM_RETURN_WORK_IF_ERROR(expr)                           \
  do {                                                          \
    absl::Status rm_status_ = (expr);                           \
    if (!rm_status_.ok()) return MakeCompletedWork(rm_status_); \
  } while (0)

// Gloo reports a timeout and a lost peer with the same exception type; only its text tells
// them apart. Callers react differently (a timeout may be a straggler, a reset is a dead peer),
// so the distinction is worth the string match.
absl::StatusCode CodeForGlooError(const std::string& what) {
  if (absl::StrContains(what, "imed out") || absl::StrContains(what, "imeout")) {
    return absl::StatusCode::kDeadlineExceeded;
  }
  return absl::StatusCode::kUnavailable;
}

class GlooCommunicatorImpl : public Communicator {
 public:
  GlooCommunicatorImpl(std::shared_ptr<gloo::transport::Device> device,
                       std::shared_ptr<gloo::rendezvous::Context> context, absl::Duration timeout)
      : device_(std::move(device)),
        context_(std::move(context)),
        timeout_(std::chrono::duration_cast<std::chrono::milliseconds>(
            absl::ToChronoMilliseconds(timeout))) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  std::shared_ptr<Work> AllReduceSumAsync(void* data, size_t count, DataType type,
                                          CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("AllReduceSum", type, stream, /*sum=*/true));
    return Run("AllReduceSum", type, count, [&](uint32_t tag) {
      if (type == DataType::kFloat32) {
        AllReduceInPlace(static_cast<float*>(data), count, tag);
      } else {
        AllReduceNarrow(static_cast<uint8_t*>(data), count, type, tag);
      }
    });
  }

  std::shared_ptr<Work> ReduceScatterSumAsync(const void* in, void* out, size_t count_per_rank,
                                              DataType type, CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("ReduceScatterSum", type, stream, /*sum=*/true));
    // Direct reduce-scatter: an all-to-all hands every rank the size() copies of its own block,
    // which it sums locally. Each rank sends and receives (size()-1)/size() of the buffer, the
    // same volume as a ring reduce-scatter, in one round instead of size()-1.
    const size_t total = count_per_rank * static_cast<size_t>(size());
    return Run("ReduceScatterSum", type, total, [&](uint32_t tag) {
      const size_t block_bytes = count_per_rank * DataTypeSize(type);
      uint8_t* blocks = Scratch(block_bytes * static_cast<size_t>(size()));
      AllToAllRaw(in, blocks, block_bytes, tag);
      SumBlocks(blocks, count_per_rank, type, static_cast<uint8_t*>(out));
    });
  }

  std::shared_ptr<Work> AllGatherAsync(const void* in, void* out, size_t count_per_rank,
                                       DataType type, CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("AllGather", type, stream, /*sum=*/false));
    return Run(
        type == DataType::kBytes ? "AllGatherBytes" : "AllGather", type, count_per_rank,
        [&](uint32_t tag) { AllGatherRaw(in, out, count_per_rank * DataTypeSize(type), tag); });
  }

  std::shared_ptr<Work> AllToAllAsync(const void* in, void* out, size_t count_per_rank,
                                      DataType type, CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("AllToAll", type, stream, /*sum=*/false));
    return Run("AllToAll", type, count_per_rank * static_cast<size_t>(size()), [&](uint32_t tag) {
      AllToAllRaw(in, out, count_per_rank * DataTypeSize(type), tag);
    });
  }

  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                       CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("Broadcast", type, stream, /*sum=*/false));
    if (root < 0 || root >= size()) {
      return MakeCompletedWork(absl::InvalidArgumentError(absl::StrFormat(
          "Gloo Broadcast on rank %d: root %d outside [0, %d)", rank(), root, size())));
    }
    return Run("Broadcast", type, count, [&](uint32_t tag) {
      gloo::BroadcastOptions opts(context_);
      // In place: the root's output doubles as its input.
      opts.setOutput(static_cast<uint8_t*>(data), count * DataTypeSize(type));
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  std::shared_ptr<Work> BarrierAsync(CommStream stream) override {
    RM_RETURN_WORK_IF_ERROR(CheckArgs("Barrier", DataType::kBytes, stream, /*sum=*/false));
    return Run("Barrier", DataType::kBytes, 1, [&](uint32_t tag) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  absl::Status CheckArgs(const char* op, DataType type, CommStream stream, bool sum) const {
    if (!stream.is_default()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Gloo %s on rank %d: Gloo runs collectives on the calling thread over host memory and "
          "takes no device stream",
          op, rank()));
    }
    return sum ? CheckSummable("Gloo", op, rank(), type) : absl::OkStatus();
  }

  uint8_t* Scratch(size_t bytes) {
    // Whole floats, so that fp32 blocks in it are aligned for float access.
    scratch_.resize((bytes + sizeof(float) - 1) / sizeof(float));
    return reinterpret_cast<uint8_t*>(scratch_.data());
  }

  void AllToAllRaw(const void* in, void* out, size_t bytes_per_rank, uint32_t tag) {
    const size_t total = bytes_per_rank * static_cast<size_t>(size());
    gloo::AlltoallOptions opts(context_);
    // Gloo's setInput takes a mutable pointer but only reads from the input buffer.
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), total);
    opts.setOutput(static_cast<uint8_t*>(out), total);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::alltoall(opts);
  }

  void AllGatherRaw(const void* in, void* out, size_t bytes_per_rank, uint32_t tag) {
    gloo::AllgatherOptions opts(context_);
    // Gloo's setInput takes a mutable pointer but only reads from the input buffer.
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes_per_rank);
    opts.setOutput(static_cast<uint8_t*>(out), bytes_per_rank * static_cast<size_t>(size()));
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  }

  void AllReduceInPlace(float* data, size_t n, uint32_t tag) {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, n);  // No input buffer: Gloo reduces in place.
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  }

  // bf16, fp16 and int8 all-reduce: a reduce-scatter (all-to-all of blocks, summed locally in
  // fp32 or int32 in rank order and rounded once per element) and an all-gather of the sums.
  // Gloo's own all-reduce would round 16-bit values after every pairwise addition, and the
  // result would depend on the ring's order. Two rounds; the volume per rank is that of a ring.
  void AllReduceNarrow(uint8_t* data, size_t count, DataType type, uint32_t tag) {
    const size_t s = static_cast<size_t>(size());
    const size_t esize = DataTypeSize(type);
    const size_t block = (count + s - 1) / s;  // elements per rank, the last block padded
    const size_t block_bytes = block * esize;
    uint8_t* padded = Scratch(3 * s * block_bytes);  // input, received blocks, gathered sums
    uint8_t* blocks = padded + s * block_bytes;
    uint8_t* gathered = blocks + s * block_bytes;
    std::memcpy(padded, data, count * esize);
    std::memset(padded + count * esize, 0, s * block_bytes - count * esize);
    AllToAllRaw(padded, blocks, block_bytes, tag);
    uint8_t* mine = padded + static_cast<size_t>(rank()) * block_bytes;  // no longer needed
    SumBlocks(blocks, block, type, mine);
    AllGatherRaw(mine, gathered, block_bytes, tag | kSecondRoundTag);
    std::memcpy(data, gathered, count * esize);
  }

  // out[i] = sum over r of blocks[r][i] (size() blocks of `count` elements), in rank order.
  void SumBlocks(const uint8_t* blocks, size_t count, DataType type, uint8_t* out) const {
    const size_t block_bytes = count * DataTypeSize(type);
    const int n = size();
    switch (type) {
      case DataType::kFloat32: {
        // fp32 accumulates in fp32 (what Gloo's all-reduce and the callers' figures rest on).
        auto* o = reinterpret_cast<float*>(out);
        std::memcpy(o, blocks, block_bytes);
        for (int r = 1; r < n; ++r) {
          const auto* b =
              reinterpret_cast<const float*>(blocks + static_cast<size_t>(r) * block_bytes);
          for (size_t i = 0; i < count; ++i) o[i] += b[i];
        }
        return;
      }
      case DataType::kBFloat16:
        Sum16(blocks, count, n, out, Bf16ToFp32, Fp32ToBf16);
        return;
      case DataType::kFloat16:
        Sum16(blocks, count, n, out, Fp16ToFp32, Fp32ToFp16);
        return;
      case DataType::kInt8:
        for (size_t i = 0; i < count; ++i) {
          int32_t acc = 0;
          for (int r = 0; r < n; ++r) {
            acc += static_cast<int8_t>(blocks[static_cast<size_t>(r) * count + i]);
          }
          out[i] = static_cast<uint8_t>(acc);  // wraps modulo 256, like NCCL's int8 sum
        }
        return;
      case DataType::kBytes:
        return;  // refused by CheckArgs
    }
  }

  template <typename ToFloat, typename FromFloat>
  static void Sum16(const uint8_t* blocks, size_t count, int n, uint8_t* out, ToFloat to_float,
                    FromFloat from_float) {
    const size_t block_bytes = count * 2;
    for (size_t i = 0; i < count; ++i) {
      float acc = 0;
      for (int r = 0; r < n; ++r) {
        uint16_t h;
        std::memcpy(&h, blocks + static_cast<size_t>(r) * block_bytes + 2 * i, 2);
        acc = r == 0 ? to_float(h) : acc + to_float(h);
      }
      const uint16_t h = from_float(acc);
      std::memcpy(out + 2 * i, &h, 2);
    }
  }

  // Runs one collective: assigns its sequence number (from which its Gloo tags derive, so ops
  // that ranks issue in the same order match up), converts Gloo's exceptions into a Status
  // naming the op, and poisons the communicator after a failure since Gloo leaves the transport
  // in an unknown state. The returned Work is done.
  template <typename Fn>
  std::shared_ptr<Work> Run(const char* op, DataType type, size_t elements, Fn&& fn) {
    return MakeCompletedWork(RunNow(op, type, elements, std::forward<Fn>(fn)));
  }

  template <typename Fn>
  absl::Status RunNow(const char* op, DataType type, size_t elements, Fn&& fn) {
    const uint64_t seq = next_seq_++;
    if (!failure_.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Gloo %s #%d on rank %d of %d: communicator unusable after an earlier failure: %s", op,
          seq, rank(), size(), std::string(failure_.message())));
    }
    if (elements == 0) return absl::OkStatus();
    try {
      // An op of two rounds tags its second with kSecondRoundTag set.
      fn(static_cast<uint32_t>(seq << 1));
      return absl::OkStatus();
    } catch (const gloo::Exception& e) {
      failure_ = absl::Status(
          CodeForGlooError(e.what()),
          absl::StrFormat(
              "Gloo %s #%d on rank %d of %d (%d elements of %s, timeout %dms) failed: %s", op, seq,
              rank(), size(), elements, DataTypeName(type), timeout_.count(), e.what()));
    } catch (const std::exception& e) {
      // GLOO_ENFORCE failures (misuse or broken invariants) are not gloo::Exception.
      failure_ = absl::InternalError(
          absl::StrFormat("Gloo %s #%d on rank %d of %d (%d elements of %s) failed: %s", op, seq,
                          rank(), size(), elements, DataTypeName(type), e.what()));
    }
    return failure_;
  }

  static constexpr uint32_t kSecondRoundTag = 1;

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::chrono::milliseconds timeout_;
  uint64_t next_seq_ = 0;
  absl::Status failure_;        // First failure; OK while healthy.
  std::vector<float> scratch_;  // Receive (and padding) buffers, reused across calls.
};

// Gloo writes to peer sockets without MSG_NOSIGNAL, so a peer that died mid-collective would kill
// this process with SIGPIPE instead of failing the operation with an error naming the lost
// rank. A handler the embedding program installed itself is left alone.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current = {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::Create(
    Store& store, int rank, int size, const std::string& iface_or_host, absl::Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("GlooCommunicator: rank %d outside [0, size=%d)", rank, size));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GlooCommunicator: timeout must be positive, got ", absl::FormatDuration(timeout)));
  }
  if (iface_or_host.empty()) {
    return absl::InvalidArgumentError("GlooCommunicator: empty interface/host name");
  }
  IgnoreSigpipeUnlessHandled();
  gloo::transport::tcp::attr attr;
  // An existing interface name wins: "eth0" is never meant as a host name to resolve.
  if (::if_nametoindex(iface_or_host.c_str()) != 0) {
    attr.iface = iface_or_host;
  } else {
    attr.hostname = iface_or_host;
  }
  const std::string where = absl::StrFormat("GlooCommunicator rendezvous of rank %d of %d on %s",
                                            rank, size, iface_or_host);
  try {
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(
        std::chrono::duration_cast<std::chrono::milliseconds>(absl::ToChronoMilliseconds(timeout)));
    std::unique_ptr<gloo::rendezvous::Store> gloo_store = MakeGlooStore(store, timeout);
    context->connectFullMesh(*gloo_store, device);
    return std::unique_ptr<Communicator>(
        new GlooCommunicatorImpl(std::move(device), std::move(context), timeout));
  } catch (const gloo::Exception& e) {
    return absl::Status(CodeForGlooError(e.what()), absl::StrCat(where, " failed: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, " failed: ", e.what()));
  }
}

}  // namespace ringmaster::trainer
