#include "trainer/model/omp_wait_default.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace ringmaster::trainer::cpu {
namespace {

bool Set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

bool ModeIs(const char* mode) {
  const char* v = std::getenv("RINGMASTER_OMP_WAIT");
  return v != nullptr && std::strcmp(v, mode) == 0;
}

}  // namespace

void ApplyOmpWaitDefault(char** argv) {
  if (Set("RINGMASTER_OMP_WAIT") || Set("OMP_WAIT_POLICY") || Set("GOMP_SPINCOUNT")) return;
  // The executable by its path, not /proc/self/exe, so that the process keeps its name (comm,
  // which ps and pgrep show); a binary replaced since start ("... (deleted)") is not re-run.
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  if (std::strstr(self, " (deleted)") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0 ||
      setenv("RINGMASTER_OMP_WAIT", "passive", 1) != 0) {
    return;
  }
  execv(self, argv);
  // No exec: go on with libgomp's default, and say so.
  unsetenv("OMP_WAIT_POLICY");
  setenv("RINGMASTER_OMP_WAIT", "spin", 1);
}

const char* OmpWaitPolicyDescription() {
  if (ModeIs("spin")) return "spin (RINGMASTER_OMP_WAIT=spin: libgomp's default)";
  if (ModeIs("passive") && !Set("GOMP_SPINCOUNT")) {
    const char* p = std::getenv("OMP_WAIT_POLICY");
    if (p != nullptr && std::strcmp(p, "passive") == 0) return "passive (trainer default)";
  }
  if (Set("OMP_WAIT_POLICY") || Set("GOMP_SPINCOUNT")) {
    return "as OMP_WAIT_POLICY / GOMP_SPINCOUNT say";
  }
  return "libgomp default (spin)";
}

bool OmpWaitDefaultApplied() { return ModeIs("passive"); }

}  // namespace ringmaster::trainer::cpu
