// The trainer's metric families as Prometheus text: names, labels, cumulative buckets, and the
// series left out until they mean something.
#include <gtest/gtest.h>

#ifdef RINGMASTER_HAVE_PROMETHEUS
#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "common/figures_exposition.h"

namespace ringmaster::trainer {
namespace {

std::string Render(const std::vector<LabeledFigures>& ranks, double now) {
  return prometheus::TextSerializer().Serialize(TrainerFamilies(ranks, now));
}

TEST(FiguresExpositionTest, RendersEveryRankWithItsLabels) {
  auto s0 = RankStatus::CreateAnonymous();
  auto s1 = RankStatus::CreateAnonymous();
  s0->OnStart(2, 10);
  StepFigures f;
  f.step = 1;
  f.loss = 0.75;
  f.seconds = 0.02;
  f.samples = 4;
  f.unix_time = 1700000000;
  s0->OnStep(f, CommTotals{10, 40, 12});
  s0->OnEnter(5, Collective::kAllReduceSum);
  const double entered = s0->Snapshot().collective_entered_unix;

  const std::string text = Render({{{{"ringmaster_job", "j-1"}, {"rank", "0"}}, s0->Snapshot()},
                                   {{{"ringmaster_job", "j-1"}, {"rank", "1"}}, s1->Snapshot()}},
                                  entered + 3);
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_samples_total{ringmaster_job=\"j-1\",rank=\"0\"} 4"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_samples_total{ringmaster_job=\"j-1\",rank=\"1\"} 0"));
  // Rank 1 has not stepped: no loss or last-step time for it (a 0 would fire stuck alerts).
  EXPECT_TRUE(
      absl::StrContains(text, "ringmaster_trainer_loss{ringmaster_job=\"j-1\",rank=\"0\"} 0.75"));
  EXPECT_FALSE(
      absl::StrContains(text, "ringmaster_trainer_loss{ringmaster_job=\"j-1\",rank=\"1\"}"));
  EXPECT_FALSE(absl::StrContains(
      text, "ringmaster_trainer_last_step_timestamp_seconds{ringmaster_job=\"j-1\",rank=\"1\"}"));
  // Buckets are cumulative and end with +Inf = count.
  EXPECT_TRUE(absl::StrContains(
      text,
      "ringmaster_trainer_step_seconds_bucket{ringmaster_job=\"j-1\",rank=\"0\",le=\"0.01\"} 0"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "ringmaster_trainer_step_seconds_bucket{ringmaster_job=\"j-1\",rank=\"0\",le=\"0.025\"} 1"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "ringmaster_trainer_step_seconds_bucket{ringmaster_job=\"j-1\",rank=\"0\",le=\"60\"} 1"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "ringmaster_trainer_step_seconds_bucket{ringmaster_job=\"j-1\",rank=\"0\",le=\"+Inf\"} 1"));
  EXPECT_TRUE(absl::StrContains(text,
                                "ringmaster_trainer_comm_bytes_total{ringmaster_job=\"j-1\",rank="
                                "\"0\",op=\"reduce\",wire=\"compressed\"} 12"));
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_collective_seq{ringmaster_job=\"j-1\",rank=\"0\"} 5"));
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_in_collective{ringmaster_job=\"j-1\",rank=\"0\"} 1"));
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_collective_wait_seconds{ringmaster_job=\"j-1\",rank=\"0\"} 3"));
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_collective_wait_seconds{ringmaster_job=\"j-1\",rank=\"1\"} 0"));
  EXPECT_TRUE(absl::StrContains(text,
                                "ringmaster_trainer_comm_seconds_total{ringmaster_job=\"j-1\","
                                "rank=\"0\",collective=\"AllToAll\"} 0"));
  EXPECT_TRUE(absl::StrContains(text, "# TYPE ringmaster_trainer_step_seconds histogram"));
  EXPECT_TRUE(absl::StrContains(text, "# TYPE ringmaster_trainer_samples_total counter"));
  // No evaluation and no memory figures yet: those families are absent.
  EXPECT_FALSE(absl::StrContains(text, "ringmaster_trainer_eval_accuracy"));
  EXPECT_FALSE(absl::StrContains(text, "ringmaster_trainer_state_bytes"));
  EXPECT_FALSE(absl::StrContains(text, "ringmaster_trainer_gpu_"));
  EXPECT_FALSE(absl::StrContains(text, "ringmaster_trainer_loss_scale"));  // fp32: no scaling
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_skipped_steps_total{ringmaster_job=\"j-1\",rank=\"0\"} 0"));
}

// A rank on a GPU: its device memory by kind, the last step's GPU time and the GPU-busy counter.
TEST(FiguresExpositionTest, RendersAGpuRanksDeviceFigures) {
  auto s = RankStatus::CreateAnonymous();
  s->OnStart(1, 10);
  s->OnDevice(DeviceFigures{3000, 5000, 700, 0.0625, 2.5, 0.015625, 0.75, 0.0078125, 0.375});
  StepFigures step;
  step.step = 1;
  step.skipped = true;
  step.loss_scale = 32768;
  s->OnStep(step, CommTotals{});
  const std::string text = Render({{{{"ringmaster_job", "j-1"}, {"rank", "0"}}, s->Snapshot()}}, 0);
  const std::string l = "{ringmaster_job=\"j-1\",rank=\"0\"";
  EXPECT_TRUE(absl::StrContains(
      text, "ringmaster_trainer_gpu_memory_bytes" + l + ",kind=\"allocated\"} 3000"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "ringmaster_trainer_gpu_memory_bytes" + l + ",kind=\"peak\"} 5000"));
  EXPECT_TRUE(
      absl::StrContains(text, "ringmaster_trainer_gpu_memory_bytes" + l + ",kind=\"arena\"} 700"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_gpu_step_seconds" + l + "} 0.0625"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_gpu_busy_seconds_total" + l + "} 2.5"));
  EXPECT_TRUE(absl::StrContains(text, "# TYPE ringmaster_trainer_gpu_busy_seconds_total counter"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_gpu_comm_seconds" + l + "} 0.015625"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_gpu_comm_seconds_total" + l + "} 0.75"));
  EXPECT_TRUE(
      absl::StrContains(text, "ringmaster_trainer_gpu_exposed_comm_seconds" + l + "} 0.0078125"));
  EXPECT_TRUE(
      absl::StrContains(text, "ringmaster_trainer_gpu_exposed_comm_seconds_total" + l + "} 0.375"));
  EXPECT_TRUE(
      absl::StrContains(text, "# TYPE ringmaster_trainer_gpu_exposed_comm_seconds_total counter"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_skipped_steps_total" + l + "} 1"));
  EXPECT_TRUE(absl::StrContains(text, "ringmaster_trainer_loss_scale" + l + "} 32768"));
}

}  // namespace
}  // namespace ringmaster::trainer

#else
TEST(FiguresExpositionTest, NeedsPrometheusCpp) { GTEST_SKIP() << "built without prometheus-cpp"; }
#endif
