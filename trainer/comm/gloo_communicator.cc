#include "trainer/comm/gloo_communicator.h"

#include <net/if.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
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

namespace ringmaster::trainer {
namespace {

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

  absl::Status AllReduceSum(float* data, size_t n) override {
    return Run("AllReduceSum", n, [&](uint32_t tag) { AllReduceInPlace(data, n, tag); });
  }

  absl::Status ReduceScatterSum(const float* in, float* out, size_t n_per_rank) override {
    // Direct reduce-scatter: an all-to-all hands every rank the size() copies of its own block,
    // which it sums locally. Each rank sends and receives (size()-1)/size() of the buffer, the
    // same volume as a ring reduce-scatter, in one round instead of size()-1.
    const size_t total = n_per_rank * static_cast<size_t>(size());
    return Run("ReduceScatterSum", total, [&](uint32_t tag) {
      scratch_.resize(total);
      AllToAllRaw(in, scratch_.data(), n_per_rank * sizeof(float), tag);
      std::copy(scratch_.data(), scratch_.data() + n_per_rank, out);
      for (int r = 1; r < size(); ++r) {
        const float* block = scratch_.data() + n_per_rank * static_cast<size_t>(r);
        for (size_t i = 0; i < n_per_rank; ++i) out[i] += block[i];
      }
    });
  }

  absl::Status AllToAll(const void* in, void* out, size_t bytes_per_rank) override {
    return Run("AllToAll", bytes_per_rank * static_cast<size_t>(size()),
               [&](uint32_t tag) { AllToAllRaw(in, out, bytes_per_rank, tag); });
  }

  absl::Status AllGatherBytes(const void* in, void* out, size_t bytes_per_rank) override {
    return Run("AllGatherBytes", bytes_per_rank, [&](uint32_t tag) {
      gloo::AllgatherOptions opts(context_);
      opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes_per_rank);
      opts.setOutput(static_cast<uint8_t*>(out), bytes_per_rank * static_cast<size_t>(size()));
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  absl::Status AllGather(const float* in, float* out, size_t n_per_rank) override {
    return Run("AllGather", n_per_rank, [&](uint32_t tag) {
      gloo::AllgatherOptions opts(context_);
      // Gloo's setInput takes a mutable pointer but only reads from the input buffer.
      opts.setInput(const_cast<float*>(in), n_per_rank);
      opts.setOutput(out, n_per_rank * static_cast<size_t>(size()));
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  absl::Status Broadcast(float* data, size_t n, int root) override {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Gloo Broadcast on rank %d: root %d outside [0, %d)", rank(), root, size()));
    }
    return Run("Broadcast", n, [&](uint32_t tag) {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(data, n);  // In place: the root's output doubles as its input.
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  absl::Status Barrier() override {
    return Run("Barrier", 1, [&](uint32_t tag) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
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

  void AllReduceInPlace(float* data, size_t n, uint32_t tag) {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, n);  // No input buffer: Gloo reduces in place.
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  }

  // Runs one collective: assigns its sequence number (which is also its Gloo tag, so ops that
  // ranks issue in the same order match up), converts Gloo's exceptions into a Status naming
  // the op, and poisons the communicator after a failure since Gloo leaves the transport in an
  // unknown state.
  template <typename Fn>
  absl::Status Run(const char* op, size_t elements, Fn&& fn) {
    const uint64_t seq = next_seq_++;
    if (!failure_.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Gloo %s #%d on rank %d of %d: communicator unusable after an earlier failure: %s", op,
          seq, rank(), size(), std::string(failure_.message())));
    }
    if (elements == 0) return absl::OkStatus();
    try {
      fn(static_cast<uint32_t>(seq));
      return absl::OkStatus();
    } catch (const gloo::Exception& e) {
      failure_ = absl::Status(
          CodeForGlooError(e.what()),
          absl::StrFormat("Gloo %s #%d on rank %d of %d (%d elements, timeout %dms) failed: %s", op,
                          seq, rank(), size(), elements, timeout_.count(), e.what()));
    } catch (const std::exception& e) {
      // GLOO_ENFORCE failures (misuse or broken invariants) are not gloo::Exception.
      failure_ = absl::InternalError(
          absl::StrFormat("Gloo %s #%d on rank %d of %d (%d elements) failed: %s", op, seq, rank(),
                          size(), elements, e.what()));
    }
    return failure_;
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::chrono::milliseconds timeout_;
  uint64_t next_seq_ = 0;
  absl::Status failure_;        // First failure; OK while healthy.
  std::vector<float> scratch_;  // ReduceScatterSum's receive buffer, reused across calls.
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
