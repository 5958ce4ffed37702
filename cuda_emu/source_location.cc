#include "cuda_emu/source_location.h"

#include <dlfcn.h>

#include <cstdio>

namespace cuda_emu {

std::string SourceLine(const void* pc) {
  if (pc == nullptr) return "?";
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) return "?";
  // The return address points after the access's call; step back one byte into it.
  const auto offset =
      reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "addr2line -C -f -i -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
           static_cast<unsigned long>(offset));
  std::string text;
  if (FILE* f = popen(cmd, "r")) {
    char line[512];
    std::string function;
    if (fgets(line, sizeof line, f) != nullptr) function = line;
    if (fgets(line, sizeof line, f) != nullptr) text = line;
    pclose(f);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    while (!function.empty() && function.back() == '\n') function.pop_back();
    if (!text.empty() && text[0] != '?') return text + " (" + function + ")";
  }
  char buf[64];
  snprintf(buf, sizeof buf, "+0x%lx", static_cast<unsigned long>(offset));
  return std::string(info.dli_fname) + buf;
}

}  // namespace cuda_emu
