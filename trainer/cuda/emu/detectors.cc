#include "trainer/cuda/emu/detectors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trainer/cuda/emu/memory.h"
#include "trainer/cuda/emu/options.h"
#include "trainer/cuda/emu/source_location.h"

namespace cuda_emu {
namespace {

constexpr size_t kSharedGuard = 64;
constexpr unsigned char kSharedGuardByte = 0xcd;

// Race detector shadow of one shared-memory byte for the current epoch.
struct Shadow {
  unsigned epoch = ~0u;
  int writer = -1, reader = -1;  // lane index; reader -2: several lanes read
  unsigned writer_wepoch = 0, reader_wepoch = 0;
  const void* writer_pc = nullptr;
  const void* reader_pc = nullptr;
};

struct RaceState {
  std::vector<std::pair<uintptr_t, uintptr_t>> statics;  // registered static __shared__
  std::unordered_map<uintptr_t, Shadow> shadow;
  bool reported = false;
};
thread_local RaceState tl_race;

bool InShared(uintptr_t a, const Block& b) {
  const auto lo = reinterpret_cast<uintptr_t>(b.dyn.data());
  if (a >= lo && a < lo + b.dyn_bytes) return true;
  for (const auto& [s, e] : tl_race.statics) {
    if (a >= s && a < e) return true;
  }
  return false;
}

std::string LaneName(const Block& b, int t) {
  const uint3 id = b.lanes[t].tid;
  return "thread (" + std::to_string(id.x) + "," + std::to_string(id.y) + "," +
         std::to_string(id.z) + ")";
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

void RegisterShared(const void* p, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  for (const auto& [s, e] : tl_race.statics) {
    if (s == lo) return;
  }
  tl_race.statics.emplace_back(lo, lo + bytes);
  // The first thread of the block to reach the declaration: poison the variable, so a thread
  // reading an element no thread of this block wrote gets NaN, not the previous block's value.
  if (GetOptions().On(kPoison)) {
    auto* b = static_cast<unsigned char*>(const_cast<void*>(p));
    for (size_t i = 0; i + 4 <= bytes; i += 4) memcpy(b + i, &kPoisonWord, 4);
  }
}

void RaceBlockBegin(Block&) {
  tl_race.statics.clear();
  tl_race.shadow.clear();
  tl_race.reported = false;
}

void RecordSharedAccess(const void* p, size_t bytes, bool write, const void* pc) {
  Block* b = tl_block;
  Lane* me = tl_lane;
  if (b == nullptr || me == nullptr || tl_race.reported || !GetOptions().On(kRace)) return;
  const auto a0 = reinterpret_cast<uintptr_t>(p);
  if (!InShared(a0, *b)) return;
  const int t = me->index, warp = t / 32;
  const unsigned wepoch = b->warp_epoch[warp];
  // Ordered with lane o's access made in warp epoch `we`: the same lane, or a lane of the same
  // warp with a warp barrier (__syncwarp or a *_sync collective) between.
  auto ordered = [&](int o, unsigned we) { return o == t || (o / 32 == warp && we != wepoch); };
  for (uintptr_t a = a0; a < a0 + bytes; ++a) {
    Shadow& s = tl_race.shadow[a];
    if (s.epoch != b->epoch) s = Shadow{b->epoch};
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
