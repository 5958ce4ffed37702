// The trainer's OpenMP waiting default, end to end: this test binary runs itself (one test,
// RM_OMP_WAIT_CHILD=1) with libgomp printing its settings (OMP_DISPLAY_ENV=verbose); the child
// calls ApplyOmpWaitDefault as the trainer's main does. libgomp's last report must be passive
// (GOMP_SPINCOUNT 0) by default, its own spinning default with RINGMASTER_OMP_WAIT=spin, and the
// user's setting when given.
#include "trainer/model/omp_wait_default.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ringmaster::trainer::cpu {
namespace {

// Output of this binary run as the child with `env` in front, and its exit status.
std::string RunChild(const std::string& env, int* status) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  const std::string cmd = "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u RINGMASTER_OMP_WAIT " + env +
                          " OMP_DISPLAY_ENV=verbose RM_OMP_WAIT_CHILD=1 '" + self +
                          "' --gtest_filter=OmpWaitDefault.Child 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, got);
  *status = pclose(p);
  return out;
}

// The value of libgomp's last "GOMP_SPINCOUNT = '...'" line (its report after any re-exec).
std::string LastSpinCount(const std::string& out) {
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = out.rfind(key);
  if (at == std::string::npos) return "(none)";
  const size_t begin = at + key.size();
  return out.substr(begin, out.find('\'', begin) - begin);
}

// Runs only as the child: what the trainer's main does first, then a report.
TEST(OmpWaitDefault, Child) {
  if (std::getenv("RM_OMP_WAIT_CHILD") == nullptr) GTEST_SKIP() << "run by the tests below";
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t i = 0; i < cmdline.size();) {
    const size_t end = cmdline.find('\0', i);
    args.push_back(cmdline.substr(i, end - i));
    i = end + 1;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ApplyOmpWaitDefault(argv.data());
  // omp_get_max_threads also keeps libgomp (whose report the parent reads) linked in.
  std::printf("CHILD policy=%s applied=%d threads=%d\n", OmpWaitPolicyDescription(),
              OmpWaitDefaultApplied() ? 1 : 0, omp_get_max_threads());
}

TEST(OmpWaitDefault, PassiveUnlessTheEnvironmentSaysOtherwise) {
  int status = -1;
  std::string out = RunChild("", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(LastSpinCount(out), "0") << out;  // libgomp waits passive
  EXPECT_NE(out.find("CHILD policy=passive (trainer default) applied=1 "), std::string::npos)
      << out;

  out = RunChild("RINGMASTER_OMP_WAIT=spin", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(LastSpinCount(out), "300000") << out;  // libgomp's own default
  EXPECT_NE(out.find("applied=0"), std::string::npos) << out;

  out = RunChild("GOMP_SPINCOUNT=1234", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(LastSpinCount(out), "1234") << out;  // the user's setting stands
  EXPECT_NE(out.find("applied=0"), std::string::npos) << out;

  out = RunChild("OMP_WAIT_POLICY=active", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(LastSpinCount(out), "30000000000") << out;
}

}  // namespace
}  // namespace ringmaster::trainer::cpu
