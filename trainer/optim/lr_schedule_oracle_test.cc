// ctest-labels: unit;oracle
// Every schedule's LR at every step against transformers' schedulers (tests/oracle/
// hf_lr_schedule.py), for short schedules with and without warmup. Skips without
// torch/transformers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "trainer/optim/lr_schedule.h"

namespace ringmaster::trainer {
namespace {

using jobspec::LrScheduleKind;

bool HavePython() {
  const char* py = std::getenv("RINGMASTER_PYTHON");
  return py != nullptr &&
         std::system(
             (std::string(py) + " -c 'import torch, transformers' >/dev/null 2>&1").c_str()) == 0;
}

// The LRs transformers gives for steps 0..total.
std::vector<double> HfLrs(const LrSchedule& s) {
  const std::string cmd = absl::StrCat(
      std::getenv("RINGMASTER_PYTHON"), " ", std::getenv("RINGMASTER_SOURCE_DIR"),
      "/tests/oracle/hf_lr_schedule.py ", std::string(jobspec::SettingName(s.kind)), " ",
      absl::StrFormat("%.17g %d %d %.17g %.17g", s.base_lr, s.warmup_steps, s.total_steps, s.lr_end,
                      s.power));
  std::vector<double> out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[128];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    double v = 0;
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (absl::SimpleAtod(line, &v)) out.push_back(v);
  }
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

TEST(LrScheduleOracle, EveryStepMatchesTransformers) {
  if (!HavePython()) GTEST_SKIP() << "python with torch + transformers not available";
  struct Case {
    LrScheduleKind kind;
    double lr;
    int64_t warmup, total;
    double lr_end, power;
  };
  const std::vector<Case> cases = {
      {LrScheduleKind::kLinear, 2e-5, 3, 17, 1e-7, 1.0},
      {LrScheduleKind::kConstant, 3e-4, 4, 12, 1e-7, 1.0},
      {LrScheduleKind::kCosine, 5e-5, 0, 13, 1e-7, 1.0},
      {LrScheduleKind::kCosine, 1e-3, 5, 23, 1e-7, 1.0},
      {LrScheduleKind::kPolynomial, 5e-5, 0, 11, 1e-7, 1.0},  // HF's defaults
      {LrScheduleKind::kPolynomial, 1e-3, 4, 19, 1e-5, 2.0},
      {LrScheduleKind::kPolynomial, 3e-4, 2, 9, 0.0, 0.5},
  };
  for (const Case& c : cases) {
    LrSchedule s;
    s.kind = c.kind;
    s.base_lr = c.lr;
    s.warmup_steps = c.warmup;
    s.total_steps = c.total;
    s.lr_end = c.lr_end;
    s.power = c.power;
    const std::string what =
        absl::StrCat(std::string(jobspec::SettingName(c.kind)), " lr ", c.lr, " warmup ", c.warmup,
                     " total ", c.total, " lr_end ", c.lr_end, " power ", c.power);
    const std::vector<double> hf = HfLrs(s);
    ASSERT_EQ(hf.size(), static_cast<size_t>(c.total + 1)) << what;
    bool moves = false;
    for (int64_t step = 0; step <= c.total; ++step) {
      const double ours = s.LrAt(step), theirs = hf[static_cast<size_t>(step)];
      EXPECT_NEAR(ours, theirs, 1e-12 * c.lr) << what << ", step " << step;
      if (step > 0 && theirs != hf[static_cast<size_t>(step) - 1]) moves = true;
    }
    EXPECT_TRUE(moves) << what << ": the schedule never changed the LR";
  }
}

}  // namespace
}  // namespace ringmaster::trainer
