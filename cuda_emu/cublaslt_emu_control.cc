#include "cuda_emu/cublaslt_emu_control.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace cuda_emu::blas {
namespace {

struct State {
  std::mutex mu;
  bool loaded = false;
  LtRefusals refusals;
  LtCounters counters;
};

State& GetState() {
  static State* s = new State;
  return *s;
}

// Under s.mu.
void LoadFromEnvironment(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  const char* env = std::getenv("CUDA_EMU_CUBLASLT_REFUSE");
  if (env == nullptr || *env == '\0') return;
  std::string error;
  if (!ParseLtRefusals(env, &s.refusals, &error)) {
    std::fprintf(stderr, "cuda_emu: CUDA_EMU_CUBLASLT_REFUSE=%s: %s\n", env, error.c_str());
    std::abort();  // A typo must not silently test nothing.
  }
}

bool ParseDim(const std::string& item, const char* prefix, int64_t* out) {
  const std::string p(prefix);
  if (item.rfind(p, 0) != 0) return false;
  char* end = nullptr;
  const long long v = std::strtoll(item.c_str() + p.size(), &end, 10);
  if (end == item.c_str() + p.size() || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

bool ParseLtRefusals(const std::string& text, LtRefusals* out, std::string* error) {
  LtRefusals r;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) continue;
    if (item == "first") {
      r.refuse_algos |= 1u;
    } else if (item == "all") {
      r.refuse_algos = (1u << kLtCandidates) - 1;
    } else if (item == "none-found") {
      r.none_found = true;
    } else if (item == "aligned") {
      r.enforce_alignment = true;
    } else if (!ParseDim(item, "m=", &r.only_m) && !ParseDim(item, "n=", &r.only_n) &&
               !ParseDim(item, "k=", &r.only_k)) {
      *error = "unknown item '" + item + "' (first, all, none-found, aligned, m=, n=, k=)";
      return false;
    }
  }
  *out = r;
  return true;
}

void SetLtRefusals(const LtRefusals& r) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.loaded = true;
  s.refusals = r;
  s.counters = LtCounters{};
}

LtRefusals GetLtRefusals() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  LoadFromEnvironment(s);
  return s.refusals;
}

LtCounters GetLtCounters() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.counters;
}

// For cublaslt_emu.cc: counts under the same lock.
void CountLt(int candidate, bool refused_algo, bool refused_alignment, bool heuristic_none) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (refused_algo) ++s.counters.refused_algo;
  if (refused_alignment) ++s.counters.refused_alignment;
  if (heuristic_none) ++s.counters.heuristic_none;
  if (!refused_algo && !refused_alignment && !heuristic_none && candidate >= 0 &&
      candidate < kLtCandidates) {
    ++s.counters.runs[candidate];
  }
}

}  // namespace cuda_emu::blas
