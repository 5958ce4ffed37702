// The racecheck instrumentation's runtime. Kernels built with cuda_emu_add_kernels(RACECHECK)
// are compiled with the compiler's thread-sanitizer instrumentation, which calls __tsan_readN /
// __tsan_writeN before every load and store; this library implements those entry points itself
// (no TSan runtime is linked), handing shared-memory accesses made inside a kernel to the
// emulator's race detector (detectors.h) and ignoring everything else. Atomics are performed
// here, as the instrumentation replaces them with calls.
#include <cstddef>
#include <cstdint>

#include "cuda_emu/census.h"
#include "cuda_emu/detectors.h"

namespace {

inline void Access(void* p, size_t n, bool write, void* pc) {
  if (cuda_emu::tl_lane == nullptr) return;  // host code, or the scheduler itself
  cuda_emu::RecordSharedAccess(p, n, write, pc);
}

constexpr int ToGcc(int mo) {
  // TSan's memory orders are 0 relaxed .. 5 seq_cst, the same numbering as __ATOMIC_*.
  return mo;
}

// Atomics are not race-checked, but the census's touched bytes count them (census.h).
inline void TouchAtomic(const volatile void* p, size_t n, bool read, bool write) {
  if (cuda_emu::tl_block == nullptr || !cuda_emu::TouchRecording()) return;
  void* q = const_cast<void*>(p);
  if (read) cuda_emu::RecordTouch(cuda_emu::tl_block->kernel, q, n, false);
  if (write) cuda_emu::RecordTouch(cuda_emu::tl_block->kernel, q, n, true);
}

}  // namespace

#define CUDA_EMU_ACCESS(N)                                                                     \
  void __tsan_read##N(void* p) { Access(p, N, false, __builtin_return_address(0)); }           \
  void __tsan_write##N(void* p) { Access(p, N, true, __builtin_return_address(0)); }           \
  void __tsan_unaligned_read##N(void* p) { Access(p, N, false, __builtin_return_address(0)); } \
  void __tsan_unaligned_write##N(void* p) { Access(p, N, true, __builtin_return_address(0)); }

#define CUDA_EMU_ATOMIC(BITS, T)                                                             \
  T __tsan_atomic##BITS##_load(const volatile T* a, int mo) {                                \
    TouchAtomic(a, sizeof(T), true, false);                                                  \
    return __atomic_load_n(a, ToGcc(mo));                                                    \
  }                                                                                          \
  void __tsan_atomic##BITS##_store(volatile T* a, T v, int mo) {                             \
    TouchAtomic(a, sizeof(T), false, true);                                                  \
    __atomic_store_n(a, v, ToGcc(mo));                                                       \
  }                                                                                          \
  T __tsan_atomic##BITS##_exchange(volatile T* a, T v, int mo) {                             \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_exchange_n(a, v, ToGcc(mo));                                             \
  }                                                                                          \
  T __tsan_atomic##BITS##_fetch_add(volatile T* a, T v, int mo) {                            \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_fetch_add(a, v, ToGcc(mo));                                              \
  }                                                                                          \
  T __tsan_atomic##BITS##_fetch_sub(volatile T* a, T v, int mo) {                            \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_fetch_sub(a, v, ToGcc(mo));                                              \
  }                                                                                          \
  T __tsan_atomic##BITS##_fetch_and(volatile T* a, T v, int mo) {                            \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_fetch_and(a, v, ToGcc(mo));                                              \
  }                                                                                          \
  T __tsan_atomic##BITS##_fetch_or(volatile T* a, T v, int mo) {                             \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_fetch_or(a, v, ToGcc(mo));                                               \
  }                                                                                          \
  T __tsan_atomic##BITS##_fetch_xor(volatile T* a, T v, int mo) {                            \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_fetch_xor(a, v, ToGcc(mo));                                              \
  }                                                                                          \
  int __tsan_atomic##BITS##_compare_exchange_strong(volatile T* a, T* c, T v, int mo, int) { \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);  \
  }                                                                                          \
  int __tsan_atomic##BITS##_compare_exchange_weak(volatile T* a, T* c, T v, int mo, int) {   \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
  }                                                                                          \
  T __tsan_atomic##BITS##_compare_exchange_val(volatile T* a, T c, T v, int mo, int) {       \
    TouchAtomic(a, sizeof(T), true, true);                                                   \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    return c;                                                                                \
  }

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_read_range(void* p, unsigned long n) {
  Access(p, n, false, __builtin_return_address(0));
}
void __tsan_write_range(void* p, unsigned long n) {
  Access(p, n, true, __builtin_return_address(0));
}
CUDA_EMU_ACCESS(1)
CUDA_EMU_ACCESS(2)
CUDA_EMU_ACCESS(4)
CUDA_EMU_ACCESS(8)
CUDA_EMU_ACCESS(16)
CUDA_EMU_ATOMIC(8, uint8_t)
CUDA_EMU_ATOMIC(16, uint16_t)
CUDA_EMU_ATOMIC(32, uint32_t)
CUDA_EMU_ATOMIC(64, uint64_t)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) {}
}  // extern "C"
