// Thread stacks that do not shrink with the process's static TLS.
//
// glibc places every module's static TLS inside the stack a thread asks for with
// pthread_attr_setstacksize, and pthread_create fails (EINVAL) when the TLS does not fit. A
// library that asks for small stacks then breaks in a process with large TLS: civetweb (under
// prometheus-cpp's /metrics) asks for 100 KiB, while a CUDA build of the trainer carries 172 KB of
// static TLS (cuBLASLt 94 KB, OpenBLAS 60 KB, NCCL 12 KB, cudart 4 KB) and even the CPU build 62
// KB.
//
// A binary that links thread_stacks.cc (and exports the symbol: see
// ringmaster_add_thread_stacks in the top-level CMakeLists.txt) defines pthread_attr_setstacksize
// itself, so every library's call reaches this one: it adds the static TLS to the size asked for
// and passes it on to glibc's. Threads that keep the default size are not affected (glibc adds
// the TLS to the default itself).
#pragma once

#include <cstddef>

namespace ringmaster {

// Bytes of static TLS of the modules loaded at start-up (their PT_TLS segments, aligned).
size_t StaticTlsBytes();

}  // namespace ringmaster
