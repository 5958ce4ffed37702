#include "cuda_emu/census.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "cuda_emu/cuda_emu_runtime.h"

namespace cuda_emu {
namespace {

struct State {
  std::mutex mu;
  Census census;
};
State& S() {
  static State s;
  return s;
}

struct PendingCost {
  bool set = false;
  double read = 0, written = 0, flops = 0;
};
thread_local PendingCost tl_cost;

int DryFromEnv() {
  const char* v = std::getenv("CUDA_EMU_CENSUS");
  return v != nullptr && std::strcmp(v, "dry") == 0 ? 1 : 0;
}
int g_dry = -1;  // -1: not read yet

const char* TypeName(int t) {
  switch (t) {
    case 0:  // CUDA_R_32F
      return "f32";
    case 2:  // CUDA_R_16F
      return "f16";
    case 14:  // CUDA_R_16BF
      return "bf16";
    case 1:  // CUDA_R_64F
      return "f64";
    default:
      return "other";
  }
}

struct TouchSets {
  std::unordered_set<uintptr_t> read, written;
};
struct TouchState {
  std::mutex mu;
  bool on = false;
  std::map<std::string, TouchSets> by_kernel;
};
TouchState& Touch() {
  static TouchState t;
  return t;
}

}  // namespace

void SetTouchRecording(bool on) {
  std::lock_guard<std::mutex> l(Touch().mu);
  Touch().on = on;
}
bool TouchRecording() {
  std::lock_guard<std::mutex> l(Touch().mu);
  return Touch().on;
}

std::map<std::string, TouchedBytes> TakeTouched() {
  std::lock_guard<std::mutex> l(Touch().mu);
  std::map<std::string, TouchedBytes> out;
  for (const auto& [name, sets] : Touch().by_kernel) {
    out[name] = TouchedBytes{static_cast<double>(sets.read.size()),
                             static_cast<double>(sets.written.size())};
  }
  Touch().by_kernel.clear();
  return out;
}

void RecordTouch(const char* kernel, const void* p, size_t bytes, bool write) {
  {
    std::lock_guard<std::mutex> l(Touch().mu);
    if (!Touch().on) return;
  }
  const std::optional<Allocation> a0 = FindAllocation(p);  // not locals, parameters, shared
  if (!a0 || a0->device < 0) return;
  std::lock_guard<std::mutex> l(Touch().mu);
  TouchSets& t = Touch().by_kernel[kernel];
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (size_t i = 0; i < bytes; ++i) (write ? t.written : t.read).insert(a + i);
}

int64_t Census::Launches() const {
  int64_t n = 0;
  for (const auto& [name, k] : kernels) n += k.launches;
  return n;
}

Census CensusSnapshot() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().census;
}

void CensusReset() {
  std::lock_guard<std::mutex> l(S().mu);
  S().census = Census{};
}

bool CensusDryRun() {
  if (g_dry < 0) g_dry = DryFromEnv();
  return g_dry == 1;
}
void SetCensusDryRun(bool on) { g_dry = on ? 1 : 0; }

void DeclareNextLaunchCost(double bytes_read, double bytes_written, double flops) {
  tl_cost = PendingCost{true, bytes_read, bytes_written, flops};
}

void CensusLaunch(const char* name) {
  const PendingCost cost = tl_cost;
  tl_cost = PendingCost{};
  std::lock_guard<std::mutex> l(S().mu);
  CensusKernel& k = S().census.kernels[name];
  ++k.launches;
  if (cost.set) {
    ++k.declared;
    k.bytes_read += cost.read;
    k.bytes_written += cost.written;
    k.flops += cost.flops;
  }
}

void CensusGemmCall(const char* api, int a_type, int b_type, int c_type, int d_type, double flops) {
  const std::string key = std::string(api) + " " + TypeName(a_type) + "/" + TypeName(b_type) + "/" +
                          TypeName(c_type) + "/" + TypeName(d_type);
  std::lock_guard<std::mutex> l(S().mu);
  CensusGemm& g = S().census.gemms[key];
  ++g.calls;
  g.flops += flops;
}

void CensusSyncCall(CensusSync what) {
  std::lock_guard<std::mutex> l(S().mu);
  Census& c = S().census;
  (what == CensusSync::kStream   ? c.stream_syncs
   : what == CensusSync::kDevice ? c.device_syncs
                                 : c.event_syncs)++;
}

void CensusCopy(bool blocking_sync_copy, bool async, bool dst_pageable, bool src_pageable,
                bool host_involved, bool device_to_device, double bytes) {
  std::lock_guard<std::mutex> l(S().mu);
  Census& c = S().census;
  c.copy_bytes += bytes;
  if (device_to_device) c.d2d_copy_bytes += bytes;
  if (!async) {
    if (blocking_sync_copy && host_involved) ++c.sync_copies;
    return;
  }
  if (dst_pageable) {
    ++c.pageable_async_d2h;
  } else if (src_pageable) {
    ++c.pageable_async_h2d;
  } else {
    ++c.async_copies;
  }
}

void CensusMemset(double bytes) {
  std::lock_guard<std::mutex> l(S().mu);
  ++S().census.memsets;
  S().census.memset_bytes += bytes;
}

void CensusAlloc(bool device, double bytes) {
  std::lock_guard<std::mutex> l(S().mu);
  Census& c = S().census;
  if (device) {
    ++c.mallocs;
    c.malloc_bytes += bytes;
  } else {
    ++c.host_allocs;
  }
}

void CensusFree() {
  std::lock_guard<std::mutex> l(S().mu);
  ++S().census.frees;
}

}  // namespace cuda_emu
