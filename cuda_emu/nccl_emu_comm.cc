#include "cuda_emu/nccl_emu_comm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cuda_emu/memory.h"

namespace cuda_emu::nccl {
namespace {

// True if process `pid` has exited (gone, or a zombie its parent has not reaped yet).
bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

const char* KindName(int32_t k) {
  switch (k) {
    case kAllReduce:
      return "ncclAllReduce";
    case kReduceScatter:
      return "ncclReduceScatter";
    case kAllGather:
      return "ncclAllGather";
    case kBroadcast:
      return "ncclBroadcast";
    default:
      return "?";
  }
}

template <typename T, typename Acc, typename Load, typename Store>
void ReduceT(void* out, const std::vector<const char*>& in, size_t n, bool max, Load load,
             Store store) {
  for (size_t i = 0; i < n; ++i) {
    Acc acc = load(reinterpret_cast<const T*>(in[0])[i]);
    for (size_t r = 1; r < in.size(); ++r) {
      const Acc v = load(reinterpret_cast<const T*>(in[r])[i]);
      acc = max ? (v > acc ? v : acc) : static_cast<Acc>(acc + v);
    }
    static_cast<T*>(out)[i] = store(acc);
  }
}

// out[i] = in[0][i] (op) in[1][i] (op) ... in rank order; see nccl_emu.h for the arithmetic.
void Reduce(void* out, const std::vector<const char*>& in, size_t n, ncclDataType_t t,
            ncclRedOp_t op) {
  const bool max = op == ncclMax;
  auto same = [](auto v) { return v; };
  switch (t) {
    case ncclFloat32:
      ReduceT<float, float>(out, in, n, max, same, same);
      break;
    case ncclFloat16:
      ReduceT<__half, float>(
          out, in, n, max, [](__half v) { return __half2float(v); },
          [](float v) { return __float2half_rn(v); });
      break;
    case ncclBfloat16:
      ReduceT<__nv_bfloat16, float>(
          out, in, n, max, [](__nv_bfloat16 v) { return __bfloat162float(v); },
          [](float v) { return __float2bfloat16_rn(v); });
      break;
    case ncclInt8:  // Unsigned arithmetic wraps without undefined behaviour; max needs signs.
      if (max) {
        ReduceT<int8_t, int8_t>(out, in, n, true, same, same);
      } else {
        ReduceT<uint8_t, uint8_t>(out, in, n, false, same, same);
      }
      break;
    case ncclUint8:
      ReduceT<uint8_t, uint8_t>(out, in, n, max, same, same);
      break;
    case ncclInt32:
      if (max) {
        ReduceT<int32_t, int32_t>(out, in, n, true, same, same);
      } else {
        ReduceT<uint32_t, uint32_t>(out, in, n, false, same, same);
      }
      break;
    default:
      break;  // Refused at the call.
  }
}

}  // namespace

double TimeoutSeconds() {
  const char* v = std::getenv("NCCL_EMU_TIMEOUT_S");
  if (v != nullptr && *v != '\0') {
    const double s = std::strtod(v, nullptr);
    if (s > 0) return s;
  }
  return 60.0;
}

Clock::duration Timeout() {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(TimeoutSeconds()));
}

size_t TypeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclFloat32:
      return 4;
    default:
      return 0;
  }
}

const char* TypeName(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclFloat16:
      return "fp16";
    case ncclBfloat16:
      return "bf16";
    case ncclFloat32:
      return "fp32";
    default:
      return "unsupported type";
  }
}

std::string& ThreadLastError() {
  thread_local std::string last;
  return last;
}

ncclResult_t CollectiveOp::Progress(ncclComm& c) {
  const size_t es = TypeBytes(dtype);
  const size_t nchunks = (count + per_chunk - 1) / per_chunk;
  std::vector<int> missing;
  std::string dead;
  while (true) {
    const size_t off = chunk * per_chunk;
    const size_t len = std::min(per_chunk, count - std::min(count, off));
    if (stage == 0) {
      if (chunk >= nchunks) return ncclSuccess;
      char* mine = c.seg.coll_slot(c.rank);
      switch (kind) {
        case kAllReduce:
        case kAllGather:
          std::memcpy(mine, send + off * es, len * es);
          break;
        case kReduceScatter:
          for (int b = 0; b < c.nranks; ++b) {
            std::memcpy(mine + b * len * es, send + (b * count + off) * es, len * es);
          }
          break;
        case kBroadcast:
          if (c.rank == root) std::memcpy(mine, send + off * es, len * es);
          break;
      }
      c.hdr().ranks[c.rank].sig = sig;
      c.Arrive();
      phase_a = c.phase;
      stage = 1;
    }
    if (stage == 1) {
      if (!c.AllArrived(phase_a, &missing, &dead)) return Waiting(c, missing, dead);
      for (int r = 0; r < c.nranks; ++r) {
        const OpSignature& s = c.hdr().ranks[r].sig;
        if (!(s == sig)) {
          return c.Fail(
              ncclInvalidUsage,
              absl::StrFormat("%s: rank %d issued %s #%d (count %d, type %d, op %d, "
                              "root %d) at the same point; collectives must match",
                              what, r, KindName(s.kind), s.seq, s.count, s.dtype, s.redop, s.root));
        }
      }
      std::vector<const char*> slots(c.nranks);
      for (int r = 0; r < c.nranks; ++r) slots[r] = c.seg.coll_slot(r);
      switch (kind) {
        case kAllReduce:
          Reduce(recv + off * es, slots, len, dtype, redop);
          break;
        case kReduceScatter:
          for (auto& s : slots) s += c.rank * len * es;
          Reduce(recv + off * es, slots, len, dtype, redop);
          break;
        case kAllGather:
          for (int r = 0; r < c.nranks; ++r) {
            std::memcpy(recv + (r * count + off) * es, slots[r], len * es);
          }
          break;
        case kBroadcast:
          std::memcpy(recv + off * es, slots[root], len * es);
          break;
      }
      c.Arrive();
      phase_b = c.phase;
      stage = 2;
    }
    if (stage == 2) {
      if (!c.AllArrived(phase_b, &missing, &dead)) return Waiting(c, missing, dead);
      ++chunk;
      stage = 0;
      start = Clock::now();  // Progress was made: the timeout counts from here.
    }
  }
}

ncclResult_t CollectiveOp::Waiting(ncclComm& c, const std::vector<int>& missing,
                                   const std::string& dead) {
  if (!dead.empty()) {
    return c.Fail(ncclRemoteError, absl::StrCat(what, ": ", dead));
  }
  waiting_for = absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "));
  return ncclInProgress;
}

ncclResult_t P2POp::Progress(ncclComm& c) {
  auto& ch = is_send ? c.seg.channel(c.rank, peer) : c.seg.channel(peer, c.rank);
  char* slot = is_send ? c.seg.p2p_slot(c.rank, peer) : c.seg.p2p_slot(peer, c.rank);
  const size_t cap = c.seg.p2p_slot_bytes();
  while (done < bytes) {
    const uint64_t sent = ch.sent.load(std::memory_order_acquire);
    const uint64_t consumed = ch.consumed.load(std::memory_order_acquire);
    const size_t len = std::min(cap, bytes - done);
    if (is_send) {
      if (sent != consumed) return Waiting(c);  // The receiver has not emptied the slot.
      std::memcpy(slot, send + done, len);
      ch.bytes.store(len, std::memory_order_relaxed);
      ch.sent.store(sent + 1, std::memory_order_release);
    } else {
      if (sent == consumed) return Waiting(c);  // Nothing sent yet.
      const size_t got = ch.bytes.load(std::memory_order_relaxed);
      if (got != len) {
        return c.Fail(ncclInvalidUsage,
                      absl::StrFormat("%s: rank %d sent a %d-byte chunk where this receive "
                                      "expected %d (ncclSend and ncclRecv sizes differ)",
                                      what, peer, got, len));
      }
      std::memcpy(recv + done, slot, len);
      ch.consumed.store(consumed + 1, std::memory_order_release);
    }
    done += len;
    start = Clock::now();  // Progress was made: the timeout counts from here.
  }
  return ncclSuccess;
}

ncclResult_t P2POp::Waiting(ncclComm& c) {
  const std::string dead = c.PeerGone({peer});
  if (!dead.empty()) {
    // A sender may store its last chunk and leave between our look at the channel and at its
    // state: a chunk waiting in the slot is still received.
    auto& ch = c.seg.channel(peer, c.rank);
    if (!is_send &&
        ch.sent.load(std::memory_order_acquire) != ch.consumed.load(std::memory_order_acquire)) {
      return ncclInProgress;
    }
    return c.Fail(ncclRemoteError, absl::StrCat(what, ": ", dead));
  }
  waiting_for = absl::StrCat("rank ", peer);
  return ncclInProgress;
}

ncclResult_t ProgressComm(ncclComm* c) {
  cuda_emu::DeviceAccessScope access;  // collectives copy device buffers through the segment
  if (c->async_error != ncclSuccess) return c->async_error;
  if (!c->joined_all) {
    const int joined = c->hdr().joined.load(std::memory_order_acquire);
    if (joined < c->nranks) {
      if (Clock::now() - c->init_start > Timeout()) {
        return c->Fail(ncclSystemError,
                       absl::StrFormat("ncclCommInitRank: only %d of %d ranks joined within "
                                       "NCCL_EMU_TIMEOUT_S=%gs",
                                       joined, c->nranks, TimeoutSeconds()));
      }
      return ncclInProgress;
    }
    c->joined_all = true;
  }
  bool collective_blocked = false;
  std::vector<std::pair<int, bool>> p2p_blocked;  // (peer, is_send) with an earlier op pending.
  for (auto it = c->pending.begin(); it != c->pending.end();) {
    Op& op = **it;
    const std::pair<int, bool> key{op.peer, op.is_send};
    const bool blocked =
        op.collective ? collective_blocked
                      : std::find(p2p_blocked.begin(), p2p_blocked.end(), key) != p2p_blocked.end();
    ncclResult_t r = blocked ? ncclInProgress : op.Progress(*c);
    if (r == ncclSuccess) {
      it = c->pending.erase(it);
      continue;
    }
    if (r != ncclInProgress) return r;
    if (!blocked && Clock::now() - op.start > Timeout()) {
      return c->Fail(ncclRemoteError,
                     absl::StrFormat("%s: %s did not arrive within NCCL_EMU_TIMEOUT_S=%gs", op.what,
                                     op.waiting_for, TimeoutSeconds()));
    }
    if (op.collective) {
      collective_blocked = true;
    } else {
      p2p_blocked.push_back(key);
    }
    ++it;
  }
  return c->pending.empty() ? ncclSuccess : ncclInProgress;
}

ncclResult_t Drive(const std::vector<ncclComm*>& comms) {
  int spins = 0;
  while (true) {
    bool busy = false;
    for (ncclComm* c : comms) {
      const ncclResult_t r = ProgressComm(c);
      if (r != ncclSuccess && r != ncclInProgress) return r;
      busy |= r == ncclInProgress;
    }
    if (!busy) return ncclSuccess;
    if (++spins < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace cuda_emu::nccl

using cuda_emu::nccl::Clock;

ncclResult_t ncclComm::Fail(ncclResult_t r, const std::string& what) {
  async_error = r;
  last_error = absl::StrCat("NCCL emulator, rank ", rank, " of ", nranks, ": ", what);
  cuda_emu::nccl::ThreadLastError() = last_error;
  std::fprintf(stderr, "%s\n", last_error.c_str());
  return r;
}

bool ncclComm::AllArrived(uint64_t p, std::vector<int>* missing, std::string* dead) {
  missing->clear();
  for (int r = 0; r < nranks; ++r) {
    if (hdr().ranks[r].arrived.load(std::memory_order_acquire) < p) missing->push_back(r);
  }
  if (missing->empty()) return true;
  *dead = PeerGone(*missing);
  if (!dead->empty()) {
    // A rank may arrive and leave between our look at its counter and at its state: look again.
    std::vector<int> still;
    for (int r : *missing) {
      if (hdr().ranks[r].arrived.load(std::memory_order_acquire) < p) still.push_back(r);
    }
    if (still.empty()) {
      missing->clear();
      dead->clear();
      return true;
    }
  }
  return false;
}

std::string ncclComm::PeerGone(const std::vector<int>& ranks) {
  for (int r : ranks) {
    const int32_t s = hdr().ranks[r].state.load(std::memory_order_acquire);
    if (s == cuda_emu::nccl::kLeft) return absl::StrCat("rank ", r, " destroyed its communicator");
    if (s == cuda_emu::nccl::kAborted) return absl::StrCat("rank ", r, " aborted its communicator");
  }
  const Clock::time_point now = Clock::now();
  if (now < next_liveness_check) return "";
  next_liveness_check = now + std::chrono::milliseconds(50);
  for (int r : ranks) {
    const int pid = hdr().ranks[r].pid.load(std::memory_order_acquire);
    if (pid != getpid() && cuda_emu::nccl::ProcessGone(pid)) {
      return absl::StrFormat("rank %d's process (pid %d) has exited", r, pid);
    }
  }
  return "";
}
