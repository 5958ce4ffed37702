// bench_scale's shared pieces: its flags, the clock it measures with and how it gives up.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ringmaster::bench_scale {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Prints "bench_scale: MSG" and exits 1: a benchmark has no caller to hand an error to.
[[noreturn]] void Die(const std::string& msg);

struct Flags {
  std::vector<int> nodes = {64, 512, 4096};
  int gpus = 8;
  std::string coordinator;
  int register_window = 64;
  int connections = 0;  // 0: one channel (TCP connection) per agent
  int nodes_per_rack = 32;
  bool ack = true;
  double timeout_s = 180;
  bool keep = false;
  std::string perf_record;  // perf record -g the coordinator from submit to all assigned
};

}  // namespace ringmaster::bench_scale
