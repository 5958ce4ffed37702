#include "cuda_emu/detectors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_emu/census.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/memory.h"
#include "cuda_emu/options.h"
#include "cuda_emu/source_location.h"

namespace cuda_emu {
namespace {

constexpr size_t kSharedGuard = 64;
constexpr unsigned char kSharedGuardByte = 0xcd;

// Race detector shadow of one shared-memory byte for the current epoch of the current block.
struct Shadow {
  uint64_t stamp = ~uint64_t{0};  // (block serial << 32) | epoch: stale entries need no clearing
  int writer = -1, reader = -1;   // lane index; reader -2: several lanes read
  unsigned writer_wepoch = 0, reader_wepoch = 0;
  const void* writer_pc = nullptr;
  const void* reader_pc = nullptr;
};

// A shared-memory region (the dynamic shared memory, or one static __shared__ variable) with
// one shadow entry per byte.
struct Region {
  uintptr_t lo = 0, hi = 0;
  std::vector<Shadow> shadow;
};

struct RaceState {
  Region dynamic;
  std::vector<Region> statics;  // registered static __shared__ variables of this worker
  size_t active_statics = 0;    // of them, registered in the current block
  uint64_t block_serial = 0;
  bool reported = false;
};
thread_local RaceState tl_race;

// The shared-memory region holding byte a, or null.
Region* RegionOf(uintptr_t a) {
  RaceState& r = tl_race;
  if (a >= r.dynamic.lo && a < r.dynamic.hi) return &r.dynamic;
  for (size_t i = 0; i < r.active_statics; ++i) {
    if (a >= r.statics[i].lo && a < r.statics[i].hi) return &r.statics[i];
  }
  return nullptr;
}

std::string LaneName(const Block& b, int t) {
  const uint3 id =
      make_uint3(t % b.block.x, (t / b.block.x) % b.block.y, t / (b.block.x * b.block.y));
  return "thread (" + std::to_string(id.x) + "," + std::to_string(id.y) + "," +
         std::to_string(id.z) + ")";
}

// Global-memory race shadow of one byte of device memory, for the current launch. Threads are
// numbered across the grid (block linear index << 10 | thread index). Two accesses are ordered
// when they come from one thread, from one block with a __syncthreads between them (different
// block epochs), or from two lanes of one warp with a warp barrier between. Different blocks of a
// launch are never ordered (no grid-wide barrier exists): a byte written by one block and read or
// written by another within one launch is a race, unless every such access is an atomic (atomics
// are not recorded).
struct GlobalShadow {
  int64_t writer = -1, reader = -1;  // global thread number; reader -2: several threads read
  unsigned writer_epoch = 0, reader_epoch = 0;
  unsigned writer_wepoch = 0, reader_wepoch = 0;
  const void* writer_pc = nullptr;
  const void* reader_pc = nullptr;
};

struct GlobalRaceState {
  std::mutex mu;  // blocks may run on several workers (CUDA_EMU_WORKERS)
  uint64_t launch = 0;
  std::unordered_map<uintptr_t, GlobalShadow> shadow;  // bytes touched in `launch`
};

GlobalRaceState& GlobalRace() {
  static GlobalRaceState s;
  return s;
}

std::string ThreadName(const Block& b, int64_t global) {
  const uint64_t block = static_cast<uint64_t>(global) >> 10;
  const uint64_t gx = b.grid.x, gy = b.grid.y;
  const int t = static_cast<int>(global & 1023);
  const uint3 id =
      make_uint3(t % b.block.x, (t / b.block.x) % b.block.y, t / (b.block.x * b.block.y));
  return "block (" + std::to_string(block % gx) + "," + std::to_string((block / gx) % gy) + "," +
         std::to_string(block / (gx * gy)) + ") thread (" + std::to_string(id.x) + "," +
         std::to_string(id.y) + "," + std::to_string(id.z) + ")";
}

void RecordGlobalAccess(Block& b, const Lane& me, uintptr_t a0, size_t bytes, bool write,
                        const void* pc) {
  const std::optional<Allocation> alloc = FindAllocation(reinterpret_cast<const void*>(a0));
  if (!alloc.has_value() || alloc->device < 0) return;  // not device memory (stack, host)
  const uint64_t block = b.bid.x + uint64_t{b.grid.x} * (b.bid.y + uint64_t{b.grid.y} * b.bid.z);
  const int64_t me_id = static_cast<int64_t>(block << 10 | static_cast<uint64_t>(me.index));
  const int warp = me.index / 32;
  const unsigned wepoch = b.warp_epoch[warp];
  auto ordered = [&](int64_t o, unsigned epoch, unsigned we) {
    if (o == me_id) return true;
    if ((static_cast<uint64_t>(o) >> 10) != block) return false;  // another block
    if (epoch != b.epoch) return true;                            // a __syncthreads between
    const int ot = static_cast<int>(o & 1023);
    return ot / 32 == warp && we != wepoch;  // a warp barrier between
  };
  GlobalRaceState& g = GlobalRace();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.launch != b.launch) {
    g.shadow.clear();
    g.launch = b.launch;
  }
  const uintptr_t end =
      std::min<uintptr_t>(a0 + bytes, reinterpret_cast<uintptr_t>(alloc->base) + alloc->bytes);
  for (uintptr_t a = a0; a < end; ++a) {
    GlobalShadow& s = g.shadow[a];
    const char* kind = nullptr;
    int64_t other = -1;
    const void* other_pc = nullptr;
    bool other_read = false;
    if (s.writer >= 0 && !ordered(s.writer, s.writer_epoch, s.writer_wepoch)) {
      kind = write ? "write after write" : "read after write";
      other = s.writer;
      other_pc = s.writer_pc;
    } else if (write && s.reader != -1 &&
               (s.reader == -2 || !ordered(s.reader, s.reader_epoch, s.reader_wepoch))) {
      kind = "write after read";
      other = s.reader;
      other_pc = s.reader_pc;
      other_read = true;
    }
    if (kind != nullptr) {
      tl_race.reported = true;
      const uintptr_t base = reinterpret_cast<uintptr_t>(alloc->base);
      b.error = std::string(b.kernel) + ": global-memory race (" + kind + ") on byte " +
                std::to_string(a - base) + " of a " + std::to_string(alloc->bytes) +
                "-byte allocation: " + ThreadName(b, me_id) +
                (write ? " writes at " : " reads at ") + SourceLine(pc) + ", " +
                (other >= 0 ? ThreadName(b, other) : std::string("several threads")) +
                (other_read ? " read at " : " wrote at ") + SourceLine(other_pc) +
                ((static_cast<uint64_t>(other) >> 10) != block || other < 0
                     ? " (different blocks of one launch are unordered: atomics, or a second "
                       "kernel?)"
                     : " (missing __syncthreads?)");
      return;
    }
    if (write) {
      s.writer = me_id;
      s.writer_epoch = b.epoch;
      s.writer_wepoch = wepoch;
      s.writer_pc = pc;
    } else if (s.reader == -1 || ordered(s.reader, s.reader_epoch, s.reader_wepoch)) {
      s.reader = me_id;
      s.reader_epoch = b.epoch;
      s.reader_wepoch = wepoch;
      s.reader_pc = pc;
    } else if (s.reader != me_id) {
      s.reader = -2;
    }
  }
}

}  // namespace

void SharedMemoryBegin(Block& b) {
  // Poisoned like global memory (a kernel reading shared memory it never wrote gets NaNs), and
  // followed by a guard zone for the bounds detector.
  b.dyn.resize(b.dyn_bytes + kSharedGuard);
  const bool poison = GetOptions().On(kPoison);
  for (size_t i = 0; i + 4 <= b.dyn_bytes; i += 4) {
    if (poison)
      memcpy(b.dyn.data() + i, &kPoisonWord, 4);
    else
      memset(b.dyn.data() + i, 0, 4);
  }
  memset(b.dyn.data() + b.dyn_bytes, kSharedGuardByte, kSharedGuard);
}

void SharedMemoryEnd(Block& b) {
  if (!GetOptions().On(kBounds)) return;
  for (size_t i = 0; i < kSharedGuard; ++i) {
    if (b.dyn[b.dyn_bytes + i] != kSharedGuardByte) {
      b.error = std::string(b.kernel) + " block (" + std::to_string(b.bid.x) + "," +
                std::to_string(b.bid.y) + "," + std::to_string(b.bid.z) +
                "): wrote past the end of " + std::to_string(b.dyn_bytes) +
                " bytes of dynamic shared memory (byte " + std::to_string(b.dyn_bytes + i) +
                "; out-of-bounds shared write)";
      return;
    }
  }
}

void RegisterShared(const void* p, size_t bytes, const char* file, int line) {
  if (tl_block != nullptr && tl_block->fast) FastPathViolation("a __shared__ variable", file, line);
  RaceState& r = tl_race;
  const auto lo = reinterpret_cast<uintptr_t>(p);
  for (size_t i = 0; i < r.active_statics; ++i) {
    if (r.statics[i].lo == lo) return;
  }
  // The first thread of the block to reach the declaration: poison the variable, so a thread
  // reading an element no thread of this block wrote gets NaN, not the previous block's value.
  if (GetOptions().On(kPoison)) {
    auto* b = static_cast<unsigned char*>(const_cast<void*>(p));
    for (size_t i = 0; i + 4 <= bytes; i += 4) memcpy(b + i, &kPoisonWord, 4);
  }
  // Regions are kept across blocks (a worker's static variables stay where they are); the
  // shadow's stamps make the previous block's entries stale.
  for (size_t i = r.active_statics; i < r.statics.size(); ++i) {
    if (r.statics[i].lo == lo && r.statics[i].hi == lo + bytes) {
      std::swap(r.statics[i], r.statics[r.active_statics++]);
      return;
    }
  }
  r.statics.insert(r.statics.begin() + static_cast<long>(r.active_statics++),
                   Region{lo, lo + bytes, std::vector<Shadow>(bytes)});
}

void RaceBlockBegin(Block& b) {
  RaceState& r = tl_race;
  r.active_statics = 0;
  ++r.block_serial;
  r.reported = false;
  r.dynamic.lo = reinterpret_cast<uintptr_t>(b.dyn.data());
  r.dynamic.hi = r.dynamic.lo + b.dyn_bytes;
  if (r.dynamic.shadow.size() < b.dyn_bytes) r.dynamic.shadow.resize(b.dyn_bytes);
}

void RecordSharedAccess(const void* p, size_t bytes, bool write, const void* pc) {
  Block* b = tl_block;
  Lane* me = tl_lane;
  if (b == nullptr || me == nullptr || tl_race.reported) return;
  const auto a0 = reinterpret_cast<uintptr_t>(p);
  Region* region = RegionOf(a0);  // most accesses are global memory
  if (region == nullptr) {
    RecordTouch(b->kernel, p, bytes, write);  // census.h (only while recording)
    if (GetOptions().On(kGlobalRace)) RecordGlobalAccess(*b, *me, a0, bytes, write, pc);
    return;
  }
  if (!GetOptions().On(kRace)) return;
  const uint64_t stamp = (tl_race.block_serial << 32) | b->epoch;
  const int t = me->index, warp = t / 32;
  const unsigned wepoch = b->warp_epoch[warp];
  // Ordered with lane o's access made in warp epoch `we`: the same lane, or a lane of the same
  // warp with a warp barrier (__syncwarp or a *_sync collective) between.
  auto ordered = [&](int o, unsigned we) { return o == t || (o / 32 == warp && we != wepoch); };
  const uintptr_t end = std::min<uintptr_t>(a0 + bytes, region->hi);
  for (uintptr_t a = a0; a < end; ++a) {
    Shadow& s = region->shadow[a - region->lo];
    if (s.stamp != stamp) s = Shadow{stamp};
    const char* kind = nullptr;
    int other = -1;
    const void* other_pc = nullptr;
    bool other_read = false;
    if (s.writer >= 0 && !ordered(s.writer, s.writer_wepoch)) {
      kind = write ? "write after write" : "read after write";
      other = s.writer;
      other_pc = s.writer_pc;
    } else if (write && s.reader != -1 && (s.reader == -2 || !ordered(s.reader, s.reader_wepoch))) {
      kind = "write after read";
      other = s.reader;
      other_pc = s.reader_pc;
      other_read = true;
    }
    if (kind != nullptr) {
      tl_race.reported = true;
      const uintptr_t dyn = reinterpret_cast<uintptr_t>(b->dyn.data());
      const std::string where = a >= dyn && a < dyn + b->dyn_bytes
                                    ? "dynamic shared byte " + std::to_string(a - dyn)
                                    : "static __shared__ byte at " + std::to_string(a);
      b->error = std::string(b->kernel) + " block (" + std::to_string(b->bid.x) + "," +
                 std::to_string(b->bid.y) + "," + std::to_string(b->bid.z) +
                 "): shared-memory race (" + kind + ") on " + where +
                 " between barriers: " + LaneName(*b, t) + (write ? " writes at " : " reads at ") +
                 SourceLine(pc) + ", " +
                 (other >= 0 ? LaneName(*b, other) : std::string("several threads")) +
                 (other_read ? " read at " : " wrote at ") + SourceLine(other_pc) +
                 " (missing __syncthreads?)";
      return;
    }
    if (write) {
      s.writer = t;
      s.writer_wepoch = wepoch;
      s.writer_pc = pc;
    } else if (s.reader == -1 || ordered(s.reader, s.reader_wepoch)) {
      s.reader = t;
      s.reader_wepoch = wepoch;
      s.reader_pc = pc;
    } else if (s.reader != t) {
      s.reader = -2;
    }
  }
}

}  // namespace cuda_emu
