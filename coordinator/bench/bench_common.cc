#include "coordinator/bench/bench_common.h"

#include <cstdio>
#include <cstdlib>

namespace ringmaster::bench_scale {

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "bench_scale: %s\n", msg.c_str());
  std::exit(1);
}

}  // namespace ringmaster::bench_scale
