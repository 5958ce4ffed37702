#include "cuda_emu/scheduler.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/detectors.h"
#include "cuda_emu/memory.h"
#include "cuda_emu/options.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_HAVE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_HAVE_ASAN 1
#endif
#if defined(CUDA_EMU_HAVE_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
// AddressSanitizer must be told about every stack switch, or it reports fiber stacks as overflows.
#define CUDA_EMU_ASAN(x) x
#else
#define CUDA_EMU_ASAN(x)
#endif

namespace cuda_emu {

constinit thread_local Block* tl_block = nullptr;
constinit thread_local Lane* tl_lane = nullptr;

namespace bctx = boost::context::detail;

namespace {

// Entry of every fiber: runs the kernel body, marks the lane done, returns to the scheduler.
void Trampoline(bctx::transfer_t t) {
  CUDA_EMU_ASAN(__sanitizer_finish_switch_fiber(nullptr, &tl_block->sched_stack,
                                                &tl_block->sched_stack_bytes));
  tl_block->sched = t.fctx;
  tl_block->body(tl_block->closure);
  Block* b = tl_block;
  tl_lane->wait = Wait::kDone;
  CUDA_EMU_ASAN(__sanitizer_start_switch_fiber(nullptr, b->sched_stack, b->sched_stack_bytes));
  bctx::jump_fcontext(b->sched, nullptr);
}

// Parks the running fiber (its lane's wait state already set); returns when resumed.
void Park() {
  CUDA_EMU_ASAN(void* fake = nullptr);
  CUDA_EMU_ASAN(
      __sanitizer_start_switch_fiber(&fake, tl_block->sched_stack, tl_block->sched_stack_bytes));
  tl_block->sched = bctx::jump_fcontext(tl_block->sched, nullptr).fctx;
  CUDA_EMU_ASAN(
      __sanitizer_finish_switch_fiber(fake, &tl_block->sched_stack, &tl_block->sched_stack_bytes));
}

void Resume(Lane& l) {
  CUDA_EMU_ASAN(void* fake = nullptr);
  CUDA_EMU_ASAN(__sanitizer_start_switch_fiber(&fake, l.stack, l.stack_bytes));
  l.ctx = bctx::jump_fcontext(l.ctx, nullptr).fctx;
  CUDA_EMU_ASAN(__sanitizer_finish_switch_fiber(fake, nullptr, nullptr));
}

// Per worker: one stack per CUDA thread, with a guard page below, reused across blocks.
class Stacks {
 public:
  ~Stacks() { Release(); }
  char* Get(int i, size_t bytes) {
    if (bytes != bytes_) Release(), bytes_ = bytes;
    while (static_cast<int>(s_.size()) <= i) {
      void* p = mmap(nullptr, bytes_ + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
      if (p == MAP_FAILED) abort();
      mprotect(p, kGuard, PROT_NONE);  // a fiber stack overflow faults instead of corrupting
      s_.push_back(static_cast<char*>(p));
    }
    return s_[i] + kGuard;
  }
  // After a failed block its fibers are abandoned mid-kernel: under ASan their frames' redzones
  // stay poisoned and would be reported against the next block's fibers on the same stacks.
  void Unpoison() {
    CUDA_EMU_ASAN(for (char* p : s_) __asan_unpoison_memory_region(p + kGuard, bytes_));
  }

 private:
  static constexpr size_t kGuard = 4096;
  void Release() {
    for (char* p : s_) munmap(p, bytes_ + kGuard);
    s_.clear();
  }
  std::vector<char*> s_;
  size_t bytes_ = 0;
};

std::string Where(const Block& b, int t) {
  char buf[200];
  const Lane& l = b.lanes[t];
  snprintf(buf, sizeof buf, "%s block (%u,%u,%u) thread (%u,%u,%u)", b.kernel, b.bid.x, b.bid.y,
           b.bid.z, l.tid.x, l.tid.y, l.tid.z);
  return buf;
}

template <typename Rng>
void Order(std::vector<int>& v, Schedule s, Rng& rng) {
  if (s == Schedule::kReverse) std::reverse(v.begin(), v.end());
  if (s == Schedule::kRandom) std::shuffle(v.begin(), v.end(), rng);
}

// Resolves one complete warp collective of warp w. Returns 1 released, 0 nothing, -1 error.
int ResolveWarp(Block& b, int w) {
  const bool strict = GetOptions().On(kWarp);
  const int base = w * 32, n = std::min(32, b.nthreads - base);
  for (int i = 0; i < n; ++i) {
    Lane& l = b.lanes[base + i];
    if (l.wait != Wait::kWarp) continue;
    unsigned m = l.mask;
    bool complete = true;
    for (int j = 0; j < 32 && complete; ++j) {
      if (!(m >> j & 1u)) continue;
      const bool missing = j >= n || b.lanes[base + j].wait == Wait::kDone;
      if (missing) {
        if (strict) {
          b.error = Where(b, base + i) + ": warp collective mask 0x" +
                    [&] {
                      char h[16];
                      snprintf(h, sizeof h, "%08x", m);
                      return std::string(h);
                    }() +
                    " names lane " + std::to_string(j) +
                    (j >= n ? ", which does not exist (blockDim not a multiple of 32)"
                            : ", which has exited (undefined on a GPU)");
          return -1;
        }
        continue;  // detector off: the lane is simply left out, as lenient hardware might
      }
      Lane& o = b.lanes[base + j];
      if (o.wait != Wait::kWarp) {
        complete = false;  // may still arrive; deadlock detection decides later
      } else if (o.mask != m || o.op != l.op) {
        b.error = Where(b, base + i) + ": lanes " + std::to_string(i) + " and " +
                  std::to_string(j) + " wait at different warp collectives (divergence)";
        return -1;
      }
    }
    if (!complete) continue;
    // The lanes that take part: in the mask and present.
    unsigned present = 0;
    for (int j = 0; j < n; ++j) {
      if ((m >> j & 1u) && b.lanes[base + j].wait == Wait::kWarp) present |= 1u << j;
    }
    unsigned ballot = 0;
    for (int j = 0; j < n; ++j) {
      if ((present >> j & 1u) && b.lanes[base + j].pred) ballot |= 1u << j;
    }
    for (int j = 0; j < n; ++j) {
      if (!(present >> j & 1u)) continue;
      Lane& d = b.lanes[base + j];
      const int width = d.width, seg = j & ~(width - 1);
      int src = j;
      switch (d.op) {
        case WarpOp::kShflIdx:
          src = seg + (d.arg & (width - 1));
          break;
        case WarpOp::kShflUp:
          src = (j - d.arg >= seg) ? j - d.arg : j;
          break;
        case WarpOp::kShflDown:
          src = (j + d.arg < seg + width) ? j + d.arg : j;
          break;
        case WarpOp::kShflXor:
          src = ((j ^ d.arg) < seg + width) ? (j ^ d.arg) : j;
          break;
        default:
          break;
      }
      if (d.op >= WarpOp::kShflIdx && d.op <= WarpOp::kShflXor) {
        if (src >= n || !(present >> src & 1u)) {
          if (strict) {
            b.error = Where(b, base + j) + ": shuffle reads lane " + std::to_string(src) +
                      ", which is not taking part (undefined value on a GPU)";
            return -1;
          }
          src = j;
        }
        memcpy(d.res, b.lanes[base + src].val, sizeof d.res);
      }
      d.bres = d.op == WarpOp::kBallot ? ballot
               : d.op == WarpOp::kAny  ? (ballot != 0)
               : d.op == WarpOp::kAll  ? (ballot == present)
                                       : 0;
      d.wait = Wait::kRun;
    }
    ++b.warp_epoch[w];
    return 1;
  }
  return 0;
}

// All live lanes wait at __syncthreads: check they agree, release them. false on error.
bool ResolveBlockBarrier(Block& b, int live) {
  const bool strict = GetOptions().On(kBarrier);
  const Lane* first = nullptr;
  unsigned count = 0;
  for (int t = 0; t < b.nthreads; ++t) {
    const Lane& l = b.lanes[t];
    if (l.wait != Wait::kBlock) continue;
    count += l.pred != 0;
    if (first == nullptr) {
      first = &l;
    } else if (strict && (l.line != first->line ||
                          (l.file != first->file && strcmp(l.file, first->file) != 0))) {
      b.error = Where(b, t) + ": waits at the __syncthreads at " + l.file + ":" +
                std::to_string(l.line) + " while thread (" + std::to_string(first->tid.x) + "," +
                std::to_string(first->tid.y) + "," + std::to_string(first->tid.z) + ") waits at " +
                first->file + ":" + std::to_string(first->line) +
                " (__syncthreads in divergent code)";
      return false;
    }
  }
  if (strict && live < b.nthreads) {
    b.error = Where(b, first->index) + ": __syncthreads at " + first->file + ":" +
              std::to_string(first->line) + " reached by " + std::to_string(live) + " of " +
              std::to_string(b.nthreads) +
              " threads; the others have returned (undefined on a GPU: return after the barrier)";
    return false;
  }
  for (Lane& l : b.lanes) {
    if (l.wait != Wait::kBlock) continue;
    l.bres = l.bop == BlockOp::kCount ? count
             : l.bop == BlockOp::kAnd ? (count == static_cast<unsigned>(live))
             : l.bop == BlockOp::kOr  ? (count != 0)
                                      : 0;
    l.wait = Wait::kRun;
  }
  ++b.epoch;
  return true;
}

template <typename Rng>
void RunBlock(Block& b, Stacks& stacks, Rng& rng) {
  const Options& o = GetOptions();
  b.lanes.assign(b.nthreads, Lane{});
  b.epoch = 0;
  std::fill(std::begin(b.warp_epoch), std::end(b.warp_epoch), 0u);
  for (int t = 0; t < b.nthreads; ++t) {
    Lane& l = b.lanes[t];
    l.index = t;
    l.tid = make_uint3(t % b.block.x, (t / b.block.x) % b.block.y, t / (b.block.x * b.block.y));
    l.stack = stacks.Get(t, o.stack_bytes);
    l.stack_bytes = o.stack_bytes;
    l.ctx = bctx::make_fcontext(l.stack + l.stack_bytes, l.stack_bytes, Trampoline);
  }
  tl_block = &b;
  RaceBlockBegin(b);
  std::vector<int> order;
  int live = b.nthreads;
  while (live > 0) {
    order.clear();
    for (int t = 0; t < b.nthreads; ++t) {
      if (b.lanes[t].wait == Wait::kRun) order.push_back(t);
    }
    if (order.empty()) {
      int released = 0;
      for (int w = 0; w * 32 < b.nthreads; ++w) {
        const int r = ResolveWarp(b, w);
        if (r < 0) return;
        released += r;
      }
      if (released > 0) continue;
      int at_block = 0;
      for (const Lane& l : b.lanes) at_block += l.wait == Wait::kBlock;
      if (at_block == live) {
        if (!ResolveBlockBarrier(b, live)) return;
        continue;
      }
      for (int t = 0; t < b.nthreads; ++t) {
        if (b.lanes[t].wait == Wait::kWarp || b.lanes[t].wait == Wait::kBlock) {
          b.error = Where(b, t) + ": deadlock: " + std::to_string(at_block) + " of " +
                    std::to_string(live) + " live threads at __syncthreads, the rest at a warp " +
                    "collective that cannot complete (barrier in divergent code?)";
          return;
        }
      }
    }
    Order(order, o.schedule, rng);
    for (int t : order) {
      tl_lane = &b.lanes[t];
      Resume(b.lanes[t]);
      tl_lane = nullptr;
      if (b.lanes[t].wait == Wait::kDone) --live;
      if (!b.error.empty()) return;  // a detector fired inside the fiber
    }
  }
}

// Thrown by FastPathViolation through the kernel's frames to RunBlockFast.
struct FastPathAbort {};

// One block of a fiber-free kernel: each thread runs to completion on this stack, in the order
// the first (and, without barriers, only) round of RunBlock would run its fibers, drawing the
// same random numbers. One lane, reused: no thread of such a kernel reads another's.
template <typename Rng>
void RunBlockFast(Block& b, Rng& rng, std::vector<int>& order) {
  const Options& o = GetOptions();
  b.epoch = 0;
  std::fill(std::begin(b.warp_epoch), std::end(b.warp_epoch), 0u);
  tl_block = &b;
  RaceBlockBegin(b);
  order.resize(static_cast<size_t>(b.nthreads));
  for (int t = 0; t < b.nthreads; ++t) order[static_cast<size_t>(t)] = t;
  Order(order, o.schedule, rng);
  Lane lane;
  const unsigned bx = b.block.x, bxy = b.block.x * b.block.y;
  try {
    for (int t : order) {
      lane.index = t;
      lane.tid = make_uint3(t % bx, (t / bx) % b.block.y, t / bxy);
      tl_lane = &lane;
      b.body(b.closure);
      tl_lane = nullptr;
      if (!b.error.empty()) return;  // a detector fired in the thread
    }
  } catch (const FastPathAbort&) {
    tl_lane = nullptr;  // b.error says what was reached
  }
}

const char* WarpOpName(WarpOp op) {
  switch (op) {
    case WarpOp::kSync:
      return "__syncwarp";
    case WarpOp::kShflIdx:
      return "__shfl_sync";
    case WarpOp::kShflUp:
      return "__shfl_up_sync";
    case WarpOp::kShflDown:
      return "__shfl_down_sync";
    case WarpOp::kShflXor:
      return "__shfl_xor_sync";
    case WarpOp::kBallot:
      return "__ballot_sync";
    case WarpOp::kAny:
      return "__any_sync";
    case WarpOp::kAll:
      return "__all_sync";
  }
  return "a warp collective";
}

const char* BlockOpName(BlockOp op) {
  switch (op) {
    case BlockOp::kSync:
      return "__syncthreads";
    case BlockOp::kCount:
      return "__syncthreads_count";
    case BlockOp::kAnd:
      return "__syncthreads_and";
    case BlockOp::kOr:
      return "__syncthreads_or";
  }
  return "a block barrier";
}

std::atomic<uint64_t> g_launches{0};
std::atomic<unsigned long> g_fast_grids{0}, g_fiber_grids{0};

}  // namespace

void FastPathViolation(const char* what, const char* file, int line) {
  Block& b = *tl_block;
  const Lane& l = *tl_lane;
  char where[160];
  snprintf(where, sizeof where, " block (%u,%u,%u) thread (%u,%u,%u)", b.bid.x, b.bid.y, b.bid.z,
           l.tid.x, l.tid.y, l.tid.z);
  b.error = std::string(b.kernel) + where + ": reached " + what + " at " + file + ":" +
            std::to_string(line) +
            " on the fast path: the rewrite step (cuda_emu_fiber_free.py) classified the kernel "
            "fiber-free, but its threads wait for or share memory with one another. A "
            "misclassification: make the rewrite step see the call (or launch the kernel through "
            "::cuda_emu::Launch); CUDA_EMU_FAST_PATH=0 runs every kernel on fibers";
  throw FastPathAbort{};
}

LaunchPathCounts GetLaunchPathCounts() {
  return LaunchPathCounts{g_fast_grids.load(), g_fiber_grids.load()};
}

void ResetLaunchCountForTest() { g_launches = 0; }

void ParkAtWarp(unsigned mask, WarpOp op, int arg, int width, int pred, const void* value,
                size_t bytes, void* result, const char* file, int line) {
  if (tl_block->fast) FastPathViolation(WarpOpName(op), file, line);
  Lane* me = tl_lane;
  me->file = file;
  me->line = line;
  me->mask = mask;
  me->op = op;
  me->arg = arg;
  me->width = width;
  me->pred = pred;
  memcpy(me->val, value, bytes);
  me->wait = Wait::kWarp;
  Park();
  if (result != nullptr) memcpy(result, me->res, bytes);
}

unsigned ParkAtBlock(BlockOp op, int pred, const char* file, int line) {
  if (tl_block->fast) FastPathViolation(BlockOpName(op), file, line);
  Lane* me = tl_lane;
  me->bop = op;
  me->pred = pred;
  me->file = file;
  me->line = line;
  me->wait = Wait::kBlock;
  Park();
  return me->bres;
}

bool RunGrid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared, void (*body)(void*),
             void* closure, bool fiber_free) {
  const Options& o = GetOptions();
  const bool fast = fiber_free && o.fast_path;
  (fast ? g_fast_grids : g_fiber_grids).fetch_add(1, std::memory_order_relaxed);
  const uint64_t nblocks = uint64_t{grid.x} * grid.y * grid.z;
  // A fresh generator per launch, seeded by the seed and the launch count: a failure reproduces
  // with the same CUDA_EMU_SEED and the same sequence of launches.
  const uint64_t launch = g_launches.fetch_add(1);
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + launch);
  std::vector<int> ids(nblocks);
  for (uint64_t i = 0; i < nblocks; ++i) ids[i] = static_cast<int>(i);
  Order(ids, o.block_order, rng);
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&](uint64_t seed) {
    DeviceAccessScope access;  // the host guard's access is per thread (memory.cc)
    static thread_local Stacks stacks;
    std::mt19937_64 wrng(seed);
    Block b;
    b.grid = grid;
    b.block = block;
    b.nthreads = static_cast<int>(block.x * block.y * block.z);
    b.body = body;
    b.closure = closure;
    b.kernel = kernel;
    b.dyn_bytes = dynamic_shared;
    b.launch = launch + 1;
    b.fast = fast;
    std::vector<int> order;
    for (uint64_t i; !failed && (i = next++) < nblocks;) {
      const uint64_t id = static_cast<uint64_t>(ids[i]);
      b.bid = make_uint3(id % grid.x, (id / grid.x) % grid.y, id / (uint64_t{grid.x} * grid.y));
      SharedMemoryBegin(b);
      if (fast) {
        RunBlockFast(b, wrng, order);
      } else {
        RunBlock(b, stacks, wrng);
      }
      if (b.error.empty()) SharedMemoryEnd(b);
      if (!b.error.empty()) {
        if (!fast) stacks.Unpoison();
        failed = true;
        ReportError(cudaErrorLaunchFailure, b.error);
      }
    }
    tl_block = nullptr;
    tl_lane = nullptr;
  };
  const int nw = static_cast<int>(std::min<uint64_t>(o.workers, nblocks));
  if (nw <= 1) {
    worker(rng());
  } else {
    std::vector<std::thread> ts;
    for (int w = 0; w < nw; ++w) ts.emplace_back(worker, rng());
    for (auto& t : ts) t.join();
  }
  return !failed;
}

}  // namespace cuda_emu
