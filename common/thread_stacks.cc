#include "common/thread_stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstdint>

namespace ringmaster {
namespace {

int AddTls(struct dl_phdr_info* info, size_t, void* data) {
  auto* total = static_cast<size_t*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_TLS) continue;
    const size_t align = ph.p_align > 0 ? ph.p_align : 1;
    *total += (ph.p_memsz + align - 1) / align * align;
  }
  return 0;
}

}  // namespace

size_t StaticTlsBytes() {
  // The start-up set does not change; modules opened later get dynamic TLS, off the stacks.
  static const size_t bytes = [] {
    size_t total = 0;
    dl_iterate_phdr(AddTls, &total);
    return total;
  }();
  return bytes;
}

}  // namespace ringmaster

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using Fn = int (*)(pthread_attr_t*, size_t);
  static const Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (next == nullptr) return 38;  // ENOSYS: glibc's definition is missing (cannot happen)
  // Keep what the caller asked for usable: the TLS comes on top, rounded up to whole pages.
  const size_t page = 4096;
  const size_t grown = (size + ringmaster::StaticTlsBytes() + page - 1) / page * page;
  return next(attr, grown);
}
