// cudaMalloc/Free/Memcpy/Memset and the allocation table behind FindAllocation.
#include "cuda_emu/memory.h"

#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda_emu/census.h"
#include "cuda_emu/cuda_emu_runtime.h"
#include "cuda_emu/options.h"
#include "cuda_emu/streams.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_HAVE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_HAVE_ASAN 1
#endif

namespace cuda_emu {
namespace {

#if defined(CUDA_EMU_HAVE_ASAN)
constexpr size_t kGuardBytes = 0;  // ASan's own redzones are exact and name the line
#else
constexpr size_t kGuardBytes = 256;
#endif
constexpr unsigned char kGuardByte = 0xcd;

struct Entry {
  size_t bytes;
  int device;
  size_t mapped = 0;  // host guard: bytes of the page mapping (0: posix_memalign)
};

struct Table {
  std::mutex mu;
  std::map<uintptr_t, Entry> allocs;  // base → entry
  int access_depth = 0;               // live DeviceAccessScopes (host guard)
};
Table& T() {
  static Table* t = new Table;  // never destroyed: frees from static destructors stay valid
  return *t;
}

// The allocation containing [p, p + n) (n = 0: containing p, or p one past its end).
std::optional<Allocation> Find(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> l(T().mu);
  auto it = T().allocs.upper_bound(a);
  if (it == T().allocs.begin()) return std::nullopt;
  --it;
  const size_t end = it->first + it->second.bytes;
  if (n == 0 ? a > end : a + n > end) return std::nullopt;
  return Allocation{reinterpret_cast<void*>(it->first), it->second.bytes, it->second.device};
}

// Host guard (CUDA_EMU_HOST_GUARD): off under ASan, which owns SIGSEGV and tracks the heap.
bool HostGuardOn() {
#if defined(CUDA_EMU_HAVE_ASAN)
  return false;
#else
  return GetOptions().host_guard;
#endif
}

// The host guard's memory protection key, where the CPU and kernel have them (x86 PKU), else -1.
// Every guarded allocation carries the key, and a DeviceAccessScope opens it for its thread with
// one register write (pkey_set) instead of an mprotect of every allocation at every launch and
// cuda* call (3.7 ms a scope for 200 allocations of 256 KiB; 0.3 us with the key: the kernel's
// page-table walk was most of the CPU of the engine's tests). Access is per thread: threads that
// the scope's thread starts inherit it (RunGrid's workers open their own scope too); other host
// threads stay guarded. Without keys: mprotect every allocation, process-wide, as before.
int GuardKey() {
  static const int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  return key;
}
thread_local int tl_key_depth = 0;  // this thread's live DeviceAccessScopes (with a key)

// Sets the protection of every page-mapped (device, guarded) allocation. Caller holds T().mu.
void ProtectAllLocked(int prot) {
  for (const auto& [base, e] : T().allocs) {
    if (e.mapped != 0) mprotect(reinterpret_cast<void*>(base), e.mapped, prot);
  }
}

struct sigaction g_previous_segv;

// A fault inside a guarded allocation is host code reading or writing device memory: report it
// (no allocation is made or freed here) and abort. Any other fault goes to the previous handler.
void OnSegv(int sig, siginfo_t* info, void* ctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  // No lock: the faulting thread may hold it; the table is only read, and the process ends.
  for (const auto& [base, e] : T().allocs) {
    if (e.mapped != 0 && a >= base && a < base + e.mapped) {
      char msg[256];
      const int len = snprintf(msg, sizeof msg,
                               "cuda_emu: host code dereferenced device memory at %p (byte %zu of "
                               "a %zu-byte cudaMalloc allocation): device pointers are valid only "
                               "in kernels and cuda* calls (host guard)\n",
                               info->si_addr, static_cast<size_t>(a - base), e.bytes);
      if (len > 0) (void)!write(2, msg, static_cast<size_t>(len));
      signal(SIGABRT, SIG_DFL);
      abort();
    }
  }
  sigaction(SIGSEGV, &g_previous_segv, nullptr);  // not ours: fault again the old way
  (void)sig;
  (void)ctx;
}

void InstallFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSegv;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_previous_segv);
  });
}

cudaError_t Allocate(void** p, size_t n, int device) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = StickyError(); e != cudaSuccess) return e;
  void* mem = nullptr;
  const bool guarded = HostGuardOn() && device >= 0;
  const bool dry = CensusDryRun() && device >= 0;  // zero pages, mapped at first touch
  size_t mapped = 0;
  if (guarded || dry) {
    InstallFaultHandler();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    mapped = (std::max<size_t>(n, 1) + kGuardBytes + page - 1) / page * page;
    mem = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) mem = nullptr;
  } else if (posix_memalign(&mem, 256, std::max<size_t>(n, 1) + kGuardBytes) != 0) {
    mem = nullptr;
  }
  if (mem == nullptr) {
    ReportError(cudaErrorMemoryAllocation, "cudaMalloc(" + std::to_string(n) + "): out of memory");
    return cudaErrorMemoryAllocation;
  }
  CensusAlloc(device >= 0, static_cast<double>(n));
  auto* bytes = static_cast<unsigned char*>(mem);
  if (dry) {
    // mmap's pages are zeros already; the counted step's values are not looked at.
  } else if (GetOptions().On(kPoison)) {
    for (size_t i = 0; i + 4 <= n; i += 4) memcpy(bytes + i, &kPoisonWord, 4);
    memset(bytes + (n & ~size_t{3}), 0xa5, n & 3);
  } else {
    memset(bytes, 0, n);  // detector off: never-written memory reads as zeros
  }
  memset(bytes + n, kGuardByte, kGuardBytes);
  std::lock_guard<std::mutex> l(T().mu);
  T().allocs[reinterpret_cast<uintptr_t>(mem)] = Entry{n, device, mapped};
  if (guarded && GuardKey() >= 0) {
    pkey_mprotect(mem, mapped, PROT_READ | PROT_WRITE, GuardKey());
  } else if (guarded && T().access_depth == 0) {
    mprotect(mem, mapped, PROT_NONE);
  }
  *p = mem;
  return cudaSuccess;
}

bool GuardIntact(uintptr_t base, const Entry& e, size_t* bad) {
  const auto* g = reinterpret_cast<const unsigned char*>(base + e.bytes);
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (g[i] != kGuardByte) {
      *bad = i;
      return false;
    }
  }
  return true;
}

std::string Hex(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Poison detector on a device → host copy: never-written words (or values computed from them)
// reaching the host are reported with their first offset.
bool CheckPoison(const char* call, const void* src, size_t n) {
  if (!GetOptions().On(kPoison)) return true;
  const std::optional<Allocation> a = Find(src, n);
  if (!a) return true;
  const uintptr_t base = reinterpret_cast<uintptr_t>(a->base);
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  size_t count = 0, first = 0;
  for (uintptr_t w = (s + 3) & ~uintptr_t{3}; w + 4 <= s + n; w += 4) {
    uint32_t v;
    memcpy(&v, reinterpret_cast<const void*>(w), 4);
    if (IsPoisonWord(v)) {
      if (count++ == 0) first = w - base;
    }
  }
  if (count > 0) {
    ReportError(cudaErrorInvalidValue,
                std::string(call) + ": " + std::to_string(count) + " of " + std::to_string(n / 4) +
                    " words copied to the host were never written on the device (or computed " +
                    "from never-written memory); first at byte " + std::to_string(first) +
                    " of the " + std::to_string(a->bytes) + "-byte allocation " + Hex(a->base));
  }
  return count == 0;
}

}  // namespace

std::optional<Allocation> FindAllocation(const void* p) { return Find(p, 0); }

DeviceAccessScope::DeviceAccessScope() : active_(HostGuardOn()) {
  if (!active_) return;
  if (GuardKey() >= 0) {
    if (tl_key_depth++ == 0) pkey_set(GuardKey(), 0);
    return;
  }
  std::lock_guard<std::mutex> l(T().mu);
  if (T().access_depth++ == 0) ProtectAllLocked(PROT_READ | PROT_WRITE);
}

DeviceAccessScope::~DeviceAccessScope() {
  if (!active_) return;
  if (GuardKey() >= 0) {
    if (--tl_key_depth == 0) pkey_set(GuardKey(), PKEY_DISABLE_ACCESS);
    return;
  }
  std::lock_guard<std::mutex> l(T().mu);
  if (--T().access_depth == 0) ProtectAllLocked(PROT_NONE);
}

bool CheckGuards(const char* after_kernel) {
  if (!GetOptions().On(kBounds) || kGuardBytes == 0) return true;
  std::string report;
  {
    std::lock_guard<std::mutex> l(T().mu);
    for (const auto& [base, e] : T().allocs) {
      size_t bad = 0;
      if (!GuardIntact(base, e, &bad)) {
        report = std::string(after_kernel) + ": wrote past the end of the " +
                 std::to_string(e.bytes) + "-byte allocation " +
                 Hex(reinterpret_cast<void*>(base)) + " (byte " + std::to_string(e.bytes + bad) +
                 " changed; out-of-bounds global write)";
        memset(reinterpret_cast<void*>(base + e.bytes), kGuardByte, kGuardBytes);
        break;
      }
    }
  }
  if (report.empty()) return true;
  ReportError(cudaErrorIllegalAddress, report);
  return false;
}

// A copy at the call, after the device's work (cudaMemcpy's semantics), uncounted.
cudaError_t MemcpyNow(void* dst, const void* src, size_t n, cudaMemcpyKind kind);

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaMalloc(void** p, size_t n) {
  return cuda_emu::Allocate(p, n, cuda_emu::CurrentDevice());
}
cudaError_t cudaMallocHost(void** p, size_t n) { return cuda_emu::Allocate(p, n, -1); }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) { return cuda_emu::Allocate(p, n, -1); }

cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  cuda_emu::DrainDevice();  // cudaFree waits for the device: queued work may use `p`
  cuda_emu::DeviceAccessScope access;
  cuda_emu::CheckGuards("before cudaFree");
  bool erased = false;
  size_t mapped = 0;
  {
    std::lock_guard<std::mutex> l(cuda_emu::T().mu);
    auto it = cuda_emu::T().allocs.find(reinterpret_cast<uintptr_t>(p));
    if (it != cuda_emu::T().allocs.end()) {
      mapped = it->second.mapped;
      cuda_emu::T().allocs.erase(it);
      erased = true;
    }
  }
  if (erased) cuda_emu::CensusFree();
  if (!erased) {
    cuda_emu::ReportError(cudaErrorInvalidValue,
                          "cudaFree(" + cuda_emu::Hex(p) + "): not the base of an allocation");
    return cudaErrorInvalidValue;
  }
  if (mapped != 0) {
    munmap(p, mapped);
  } else {
    free(p);
  }
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }

}  // extern "C"

namespace cuda_emu {
namespace {

// The direction check of a copy (memcpy detector); reports and returns the error.
cudaError_t CheckCopy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  const auto d = Find(dst, n), s = Find(src, n);
  const bool dd = d && d->device >= 0, sd = s && s->device >= 0;
  // The direction check: a host pointer where device memory is named (or the reverse) is a bug
  // on a GPU (an illegal address, or the host reading device memory); here both are host memory,
  // so only this check can tell.
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      ok = dd && !sd;
      break;
    case cudaMemcpyDeviceToHost:
      ok = sd && !dd;
      break;
    case cudaMemcpyDeviceToDevice:
      ok = dd && sd;
      break;
    case cudaMemcpyHostToHost:
      ok = !dd && !sd;
      break;
    case cudaMemcpyDefault:
      ok = true;
      break;
    default:
      ok = false;
  }
  if (!ok && GetOptions().On(kMemcpyDirection)) {
    static const char* kNames[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice",
                                   "Default"};
    ReportError(
        cudaErrorInvalidValue,
        std::string("cudaMemcpy") + (kind >= 0 && kind <= 4 ? kNames[kind] : "?") + "(dst " +
            Hex(dst) + (d ? " device" : " host") + ", src " + Hex(src) + (s ? " device" : " host") +
            ", " + std::to_string(n) +
            " bytes): the pointers do not match the direction (or a device range overruns its "
            "allocation)");
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// The copy itself, once its stream reached it; a poisoned device source is reported.
cudaError_t CopyNow(void* dst, const void* src, size_t n) {
  DeviceAccessScope access;
  const auto d = Find(dst, n), s = Find(src, n);
  memmove(dst, src, n);
  // The copy is done either way; a poisoned source makes the call fail so a test notices.
  if (s && s->device >= 0 && !(d && d->device >= 0) &&
      !CheckPoison("cudaMemcpy DeviceToHost", src, n)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

}  // namespace
}  // namespace cuda_emu

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (n != 0) {
    const bool host = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost ||
                      kind == cudaMemcpyDefault;
    cuda_emu::CensusCopy(/*blocking_sync_copy=*/true, /*async=*/false, false, false, host,
                         kind == cudaMemcpyDeviceToDevice, static_cast<double>(n));
  }
  return cuda_emu::MemcpyNow(dst, src, n, kind);
}

}  // extern "C"

namespace cuda_emu {

cudaError_t MemcpyNow(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (cudaError_t e = cuda_emu::StickyError(); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  cuda_emu::DrainDevice();  // on the legacy default stream: after every stream's work
  {
    cuda_emu::DeviceAccessScope access;
    if (cudaError_t e = cuda_emu::CheckCopy(dst, src, n, kind); e != cudaSuccess) return e;
  }
  return CopyNow(dst, src, n);
}

}  // namespace cuda_emu

extern "C" {

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (n != 0) {
    cuda_emu::DeviceAccessScope access;
    const auto d = cuda_emu::Find(dst, n), s = cuda_emu::Find(src, n);
    const bool d2d = d && d->device >= 0 && s && s->device >= 0;
    cuda_emu::CensusCopy(false, /*async=*/true, !d.has_value(), !s.has_value(), !d2d, d2d,
                         static_cast<double>(n));
  }
  if (cuda_emu::IsLegacyStream(stream) || !cuda_emu::GetOptions().lazy_streams) {
    return cuda_emu::MemcpyNow(dst, src, n, kind);
  }
  if (cudaError_t e = cuda_emu::StickyError(); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  bool dst_pageable, src_pageable;
  {
    cuda_emu::DeviceAccessScope access;
    if (cudaError_t e = cuda_emu::CheckCopy(dst, src, n, kind); e != cudaSuccess) return e;
    dst_pageable = !cuda_emu::Find(dst, n).has_value();
    src_pageable = !cuda_emu::Find(src, n).has_value();
  }
  if (dst_pageable) {
    // Into pageable memory the call returns once the copy is done: after the stream's work.
    cuda_emu::Drain(stream);
    return cuda_emu::CopyNow(dst, src, n);
  }
  if (src_pageable) {
    // From pageable memory the bytes are staged at the call: the caller may reuse its buffer.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + n);
    cuda_emu::Submit(stream, [dst, staged, n] { cuda_emu::CopyNow(dst, staged->data(), n); });
    return cudaSuccess;
  }
  // Between device memory and pinned host memory: at the stream's turn, as on a GPU.
  cuda_emu::Submit(stream, [dst, src, n] { cuda_emu::CopyNow(dst, src, n); });
  return cudaSuccess;
}

// The blocking form is the legacy default stream's: after every stream's work, at the call.
cudaError_t cudaMemset(void* p, int value, size_t n) {
  return cudaMemsetAsync(p, value, n, nullptr);
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
  if (cudaError_t e = cuda_emu::StickyError(); e != cudaSuccess) return e;
  {
    cuda_emu::DeviceAccessScope access;
    const auto a = cuda_emu::Find(p, n);
    if (!a || a->device < 0) {
      cuda_emu::ReportError(cudaErrorInvalidValue, "cudaMemset(" + cuda_emu::Hex(p) + ", " +
                                                       std::to_string(n) +
                                                       " bytes): not inside one device allocation");
      return cudaErrorInvalidValue;
    }
  }
  cuda_emu::CensusMemset(static_cast<double>(n));
  cuda_emu::Submit(stream, [p, value, n] {
    cuda_emu::DeviceAccessScope access;
    memset(p, value, n);
  });
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, cuda_emu::CurrentDevice());
  *total = prop.totalGlobalMem;
  *free_bytes = prop.totalGlobalMem / 2;
  return cudaSuccess;
}

}  // extern "C"
