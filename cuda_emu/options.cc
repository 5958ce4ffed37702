#include "cuda_emu/options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace cuda_emu {

bool ParseSchedule(const std::string& s, Schedule* out) {
  if (s == "forward")
    *out = Schedule::kForward;
  else if (s == "reverse")
    *out = Schedule::kReverse;
  else if (s == "random")
    *out = Schedule::kRandom;
  else
    return false;
  return true;
}

const char* ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kForward:
      return "forward";
    case Schedule::kReverse:
      return "reverse";
    case Schedule::kRandom:
      return "random";
  }
  return "?";
}

namespace {

[[noreturn]] void BadEnv(const char* var, const char* value, const char* expected) {
  fprintf(stderr, "cuda_emu: %s=%s: expected %s\n", var, value, expected);
  abort();
}

long PositiveEnv(const char* var, long fallback) {
  const char* v = getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = strtol(v, &end, 10);
  if (*end != '\0' || n <= 0) BadEnv(var, v, "a positive integer");
  return n;
}

Options FromEnvironment() {
  Options o;
  if (const char* s = getenv("CUDA_EMU_SCHEDULE"); s != nullptr && *s != '\0') {
    if (!ParseSchedule(s, &o.schedule)) BadEnv("CUDA_EMU_SCHEDULE", s, "forward|reverse|random");
  }
  o.block_order = o.schedule;
  if (const char* s = getenv("CUDA_EMU_BLOCK_ORDER"); s != nullptr && *s != '\0') {
    if (!ParseSchedule(s, &o.block_order)) {
      BadEnv("CUDA_EMU_BLOCK_ORDER", s, "forward|reverse|random");
    }
  }
  o.seed = static_cast<uint64_t>(PositiveEnv("CUDA_EMU_SEED", 1));
  o.workers = static_cast<int>(PositiveEnv("CUDA_EMU_WORKERS", 1));
  o.stack_bytes = static_cast<size_t>(PositiveEnv("CUDA_EMU_STACK_KB", 64)) << 10;
  if (const char* s = getenv("CUDA_EMU_STREAMS"); s != nullptr && *s != '\0') {
    const std::string v = s;
    if (v != "eager" && v != "lazy") BadEnv("CUDA_EMU_STREAMS", s, "eager|lazy");
    o.lazy_streams = v == "lazy";
  }
  if (const char* s = getenv("CUDA_EMU_HOST_GUARD"); s != nullptr && *s != '\0') {
    const std::string v = s;
    if (v != "0" && v != "1") BadEnv("CUDA_EMU_HOST_GUARD", s, "0 or 1");
    o.host_guard = v == "1";
  }
  if (const char* s = getenv("CUDA_EMU_FAST_PATH"); s != nullptr && *s != '\0') {
    const std::string v = s;
    if (v != "0" && v != "1") BadEnv("CUDA_EMU_FAST_PATH", s, "0 or 1");
    o.fast_path = v == "1";
  }
  if (const char* s = getenv("CUDA_EMU_DISABLE"); s != nullptr) {
    std::stringstream list(s);
    for (std::string name; std::getline(list, name, ',');) {
      if (name.empty()) continue;
      bool found = false;
      for (const auto& d : kDetectorNames) {
        if (name == d.name) o.detectors &= ~static_cast<uint32_t>(d.bit), found = true;
      }
      if (!found) {
        BadEnv(
            "CUDA_EMU_DISABLE", s,
            "a comma list of launch,pointers,memcpy,poison,barrier,warp,bounds,race,global-race");
      }
    }
  }
  return o;
}

}  // namespace

Options& MutableOptions() {
  static Options o = FromEnvironment();
  return o;
}
const Options& GetOptions() { return MutableOptions(); }

}  // namespace cuda_emu
