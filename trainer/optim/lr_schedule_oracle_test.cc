// ctest-labels: unit;oracle
// Every schedule's LR at every step against transformers' schedulers (tests/oracle/
// hf_lr_schedule.py), for short schedules with and without warmup. Skips without
// torch/transformers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
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

// The LRs transformers gives for steps 0..total of each schedule, from one python process
// (the schedules go in a file, one a line).
std::vector<std::vector<double>> HfLrs(const std::vector<LrSchedule>& schedules) {
  const std::string in = absl::StrCat(::testing::TempDir(), "lr_schedules_", ::getpid(), ".txt");
  {
    std::ofstream f(in);
    for (const LrSchedule& s : schedules) {
      f << absl::StrFormat("%s %.17g %d %d %.17g %.17g\n",
                           std::string(jobspec::SettingName(s.kind)), s.base_lr, s.warmup_steps,
                           s.total_steps, s.lr_end, s.power);
    }
  }
  const std::string cmd =
      absl::StrCat(std::getenv("RINGMASTER_PYTHON"), " ", std::getenv("RINGMASTER_SOURCE_DIR"),
                   "/tests/oracle/hf_lr_schedule.py < ", in);
  std::vector<std::vector<double>> out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  std::remove(in.c_str());
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<double>& lrs = out.emplace_back();
    for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      double v = 0;
      EXPECT_TRUE(absl::SimpleAtod(word, &v)) << word;
      lrs.push_back(v);
    }
  }
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
  std::vector<LrSchedule> schedules;
  for (const Case& c : cases) {
    LrSchedule s;
    s.kind = c.kind;
    s.base_lr = c.lr;
    s.warmup_steps = c.warmup;
    s.total_steps = c.total;
    s.lr_end = c.lr_end;
    s.power = c.power;
    schedules.push_back(s);
  }
  const std::vector<std::vector<double>> hf = HfLrs(schedules);
  ASSERT_EQ(hf.size(), schedules.size());
  for (size_t i = 0; i < schedules.size(); ++i) {
    const LrSchedule& s = schedules[i];
    const std::string what = absl::StrCat(std::string(jobspec::SettingName(s.kind)), " lr ",
                                          s.base_lr, " warmup ", s.warmup_steps, " total ",
                                          s.total_steps, " lr_end ", s.lr_end, " power ", s.power);
    ASSERT_EQ(hf[i].size(), static_cast<size_t>(s.total_steps + 1)) << what;
    bool moves = false;
    for (int64_t step = 0; step <= s.total_steps; ++step) {
      const double theirs = hf[i][static_cast<size_t>(step)];
      EXPECT_NEAR(s.LrAt(step), theirs, 1e-12 * s.base_lr) << what << ", step " << step;
      if (step > 0 && theirs != hf[i][static_cast<size_t>(step) - 1]) moves = true;
    }
    EXPECT_TRUE(moves) << what << ": the schedule never changed the LR";
  }
}

}  // namespace
}  // namespace ringmaster::trainer
