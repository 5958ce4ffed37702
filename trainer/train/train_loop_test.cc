// TrainLoop against FakeEngine (no model): the plan's micro-batches and their weights, empty
// micro-batches, evaluation at epoch ends and of the final weights, export at the end, resume after
// a stop request continuing with the batches of an uninterrupted run, and divergence.
#include "trainer/train/train_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/rank_status.h"
#include "trainer/train/fake_engine.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TrainLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("train_loop_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A training file of `rows` rows whose sentences have 1..5 words.
  std::string WriteTsv(const std::string& name, int rows) {
    std::string text = "sentence\tlabel\n";
    for (int i = 0; i < rows; ++i) {
      std::string s = "w";
      for (int k = 0; k < i % 5; ++k) s += " w";
      absl::StrAppend(&text, s, "\t", i % 2, "\n");
    }
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteFileAtomic(path, text).ok());
    return path;
  }

  JobSpec Job(const std::string& out, int train_rows) {
    JobSpec job;
    job.name = "fake";
    job.data.train = WriteTsv("train.tsv", train_rows);
    job.data.shuffle = false;
    job.train.epochs = 1;
    job.train.global_batch_size = 10;
    job.train.micro_batch_size = 4;
    job.train.lr = 0.1;
    job.train.lr_schedule = jobspec::LrScheduleKind::kConstant;
    job.train.max_grad_norm = 0;
    job.train.seed = 7;
    job.train.eval_batch_size = 4;
    job.output.dir = (dir_ / out).string();
    job.output.checkpoint_every_steps = 0;
    fs::create_directories(job.output.dir);
    return job;
  }

  // A loop over `job` with `engine`; the engine stays reachable through the returned pointer.
  std::unique_ptr<TrainLoop> Loop(const JobSpec& job, std::unique_ptr<FakeEngine> engine,
                                  int eval_rows = 0, int restart_count = 0) {
    TrainData data;
    absl::StatusOr<TsvRowIndex> index = TsvRowIndex::Build(job.data.train, 2);
    EXPECT_TRUE(index.ok()) << index.status();
    data.train = std::make_unique<TsvRowIndex>(*std::move(index));
    data.train_keys = data.train->LengthKeys(16);
    // [CLS]=1, one id 5 per word, [SEP]=2.
    data.encode = [](std::string_view text) {
      std::vector<int32_t> ids = {1};
      bool in_word = false;
      for (char c : text) {
        if (c != ' ' && !in_word) ids.push_back(5);
        in_word = c != ' ';
      }
      ids.push_back(2);
      return ids;
    };
    for (int i = 0; i < eval_rows; ++i)
      data.eval.push_back({{1, 5, 2}, static_cast<float>(i % 2), {}});
    data.pad_id = 0;
    data.num_labels = 2;
    LoopWorld world;
    world.restart_count = restart_count;
    TrainPlan plan = MakeTrainPlan(job, world, data.train_keys);
    return std::make_unique<TrainLoop>(job, world, std::move(data), plan, std::move(engine),
                                       [this](const std::string& d, const float* params) {
                                         exports_.push_back(d);
                                         exported_w_ = params[0];
                                         return absl::OkStatus();
                                       });
  }

  static std::vector<std::string> Lines(const std::string& path) {
    absl::StatusOr<std::string> text = ReadFile(path);
    EXPECT_TRUE(text.ok()) << text.status();
    return absl::StrSplit(text.value_or(""), '\n', absl::SkipEmpty());
  }

  fs::path dir_;
  std::vector<std::string> exports_;
  float exported_w_ = -1;
};

std::vector<int64_t> Range(int64_t b, int64_t e) {
  std::vector<int64_t> v;
  for (int64_t i = b; i < e; ++i) v.push_back(i);
  return v;
}

TEST_F(TrainLoopTest, AccumulatesMicroBatchesWeightedByTheirShareOfTheStep) {
  // 23 rows, global batch 10, micro-batch 4: ceil(10 / 4) = 3 micro-batches a step; the third
  // step has 3 rows, so its second and third micro-batches are empty.
  const JobSpec job = Job("out", 23);
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  auto loop = Loop(job, std::move(engine));
  EXPECT_EQ(loop->plan().accumulation, 3);
  EXPECT_EQ(loop->plan().steps_per_epoch, 3);
  absl::StatusOr<TrainResult> r = loop->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  EXPECT_FALSE(r->interrupted);
  using Call = FakeEngine::MicroBatchCall;
  const std::vector<Call>& mb = fake->micro_batches;
  ASSERT_EQ(mb.size(), 9u);
  EXPECT_EQ(mb[0], (Call{0, Range(0, 4), 0.4f, false, mb[0].dropout_seed}));
  EXPECT_EQ(mb[1], (Call{0, Range(4, 8), 0.4f, false, mb[1].dropout_seed}));
  EXPECT_EQ(mb[2], (Call{0, Range(8, 10), 0.2f, true, mb[2].dropout_seed}));
  EXPECT_EQ(mb[3], (Call{1, Range(10, 14), 0.4f, false, mb[3].dropout_seed}));
  EXPECT_EQ(mb[5], (Call{1, Range(18, 20), 0.2f, true, mb[5].dropout_seed}));
  EXPECT_EQ(mb[6], (Call{2, Range(20, 23), 1.0f, false, mb[6].dropout_seed}));
  EXPECT_EQ(mb[7], (Call{2, {}, 0.0f, false, 0}));
  EXPECT_EQ(mb[8], (Call{2, {}, 0.0f, true, 0}));
  // Dropout seeds differ per micro-batch and step.
  EXPECT_NE(mb[0].dropout_seed, mb[1].dropout_seed);
  EXPECT_NE(mb[0].dropout_seed, mb[3].dropout_seed);
  EXPECT_THAT(std::vector<std::string>(fake->calls.begin(), fake->calls.begin() + 5),
              ElementsAre("begin", "micro", "micro", "micro", "finish"));
  EXPECT_THAT(std::vector<std::string>(fake->calls.begin() + 10, fake->calls.begin() + 15),
              ElementsAre("begin", "micro", "empty", "empty", "finish"));
  // One metrics line per step.
  const std::vector<std::string> lines = Lines(job.output.dir + "/metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[2], HasSubstr("\"step\":3"));
}

TEST_F(TrainLoopTest, WeightedSharesSplitAGlobalBatchByRankWeights) {
  JobSpec job;
  job.train.global_batch_size = 8;
  job.train.micro_batch_size = 2;
  LoopWorld world{1, 2, {1.0, 3.0}};
  // Rank 1 takes 6 of 8 (the largest share): 3 micro-batches for every rank.
  const TrainPlan plan = MakeTrainPlan(job, world, std::vector<uint32_t>(16, 3));
  EXPECT_EQ(plan.accumulation, 3);
  EXPECT_EQ(plan.steps_per_epoch, 2);
  EXPECT_THAT(ShareOf(job, world, plan, Range(100, 108)),
              ElementsAre(ElementsAre(102, 103), ElementsAre(104, 105), ElementsAre(106, 107)));
  world.rank = 0;
  EXPECT_THAT(ShareOf(job, world, plan, Range(100, 108)),
              ElementsAre(ElementsAre(100, 101), ElementsAre(), ElementsAre()));
}

TEST_F(TrainLoopTest, EvaluatesAtEveryEpochEndAndExportsAtTheEnd) {
  JobSpec job = Job("out", 20);
  job.train.epochs = 2;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  // 6 eval rows in batches of 4: two forwards per evaluation.
  auto loop = Loop(job, std::move(engine), /*eval_rows=*/6);
  absl::StatusOr<TrainResult> r = loop->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 4);
  EXPECT_THAT(fake->eval_steps, ElementsAre(2, 2, 4, 4));
  EXPECT_EQ(r->eval.examples, 6);
  // The fake's logit 1 wins when w is above eval row i's target; row i's label is i % 2.
  int correct = 0;
  for (int i = 0; i < 6; ++i) {
    const bool pred1 = fake->w() - FakeEngine::Target(i) > 0;
    correct += (pred1 ? 1 : 0) == i % 2 ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(r->eval.accuracy, correct / 6.0);
  std::vector<std::string> eval_lines;
  for (const std::string& l : Lines(job.output.dir + "/metrics.jsonl")) {
    if (l.find("eval_loss") != std::string::npos) eval_lines.push_back(l);
  }
  ASSERT_EQ(eval_lines.size(), 2u);
  EXPECT_THAT(eval_lines[0], HasSubstr("\"epoch\":1"));
  EXPECT_THAT(eval_lines[1], HasSubstr("\"epoch\":2"));
  // The end: a checkpoint of the last step, the gathered weights exported once, a rank report.
  const std::vector<std::string>& c = fake->calls;
  ASSERT_GE(c.size(), 2u);
  EXPECT_THAT(std::vector<std::string>(c.end() - 2, c.end()), ElementsAre("save@4", "gather"));
  EXPECT_THAT(exports_, ElementsAre(job.output.dir + "/final"));
  EXPECT_EQ(r->export_dir, job.output.dir + "/final");
  EXPECT_EQ(exported_w_, fake->w());
  EXPECT_TRUE(fs::exists(job.output.dir + "/ranks/rank-0.json"));
}

// max_steps ending mid-epoch: the last epoch's evaluation is of older weights, so the final
// weights (the exported ones) are evaluated after the last step; that figure is the result,
// the metrics' last evaluation and a metrics.jsonl line with its step. Run again, the finished
// run reports the same figure without appending the line twice.
TEST_F(TrainLoopTest, EvaluatesTheFinalWeightsWhenTheLastStepIsNotAnEpochEnd) {
  JobSpec job = Job("out", 20);  // 2 steps an epoch
  job.train.epochs = 2;
  job.train.max_steps = 3;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  auto loop = Loop(job, std::move(engine), /*eval_rows=*/6);
  std::unique_ptr<RankStatus> status = RankStatus::CreateAnonymous();
  loop->set_metrics(status.get());
  absl::StatusOr<TrainResult> r = loop->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  // Epoch 1's evaluation after step 2, the final weights' after step 3 (two forwards each).
  EXPECT_THAT(fake->eval_steps, ElementsAre(2, 2, 3, 3));
  EXPECT_EQ(r->eval_step, 3);
  EXPECT_EQ(r->eval.examples, 6);
  int correct = 0;  // of the exported weights; see EvaluatesAtEveryEpochEndAndExportsAtTheEnd
  for (int i = 0; i < 6; ++i) {
    const bool pred1 = exported_w_ - FakeEngine::Target(i) > 0;
    correct += (pred1 ? 1 : 0) == i % 2 ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(r->eval.accuracy, correct / 6.0);
  const RankFigures f = status->Snapshot();
  EXPECT_TRUE(f.has_eval);
  EXPECT_DOUBLE_EQ(f.eval_accuracy, r->eval.accuracy);
  EXPECT_DOUBLE_EQ(f.eval_loss, r->eval.loss);
  auto eval_lines = [&] {
    std::vector<nlohmann::json> out;
    for (const std::string& l : Lines(job.output.dir + "/metrics.jsonl")) {
      nlohmann::json j = nlohmann::json::parse(l);
      if (j.contains("eval_loss")) out.push_back(j);
    }
    return out;
  };
  std::vector<nlohmann::json> evals = eval_lines();
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(evals[0]["step"], 2);
  EXPECT_EQ(evals[0]["epoch"].get<double>(), 1.0);
  EXPECT_EQ(evals[1]["step"], 3);
  // Half-way through the second epoch, as HF's state.epoch says it (issue #32; was 2).
  EXPECT_EQ(evals[1]["epoch"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(evals[1]["eval_accuracy"].get<double>(), r->eval.accuracy);
  EXPECT_DOUBLE_EQ(evals[1]["eval_loss"].get<double>(), r->eval.loss);

  // Started again: resumes at step 3, trains nothing, reports the same final figure.
  auto again_engine = std::make_unique<FakeEngine>();
  FakeEngine* again = again_engine.get();
  std::unique_ptr<TrainLoop> again_loop = Loop(job, std::move(again_engine), 6);  // owns `again`
  absl::StatusOr<TrainResult> r2 = again_loop->Run();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(again->calls.front(), "load@3");
  EXPECT_TRUE(again->micro_batches.empty());
  EXPECT_EQ(r2->eval_step, 3);
  EXPECT_DOUBLE_EQ(r2->eval.accuracy, r->eval.accuracy);
  EXPECT_EQ(eval_lines().size(), 2u);
}

// Ending at an epoch end, that epoch's evaluation is already of the final weights: no second.
TEST_F(TrainLoopTest, DoesNotEvaluateTwiceWhenTheLastStepIsAnEpochEnd) {
  JobSpec job = Job("out", 20);
  job.train.epochs = 3;
  job.train.max_steps = 4;  // the end of epoch 2
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  std::unique_ptr<TrainLoop> loop = Loop(job, std::move(engine), /*eval_rows=*/6);
  absl::StatusOr<TrainResult> r = loop->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(fake->eval_steps, ElementsAre(2, 2, 4, 4));
  EXPECT_EQ(r->eval_step, 4);
}

// An engine on a GPU reports its device figures: the loop passes them to the metrics after every
// step and writes them into the rank report; a CPU engine's report has none.
TEST_F(TrainLoopTest, ReportsAGpuEnginesDeviceFiguresToTheMetricsAndTheRankReport) {
  for (const bool gpu : {false, true}) {
    JobSpec job = Job(gpu ? "out-gpu" : "out-cpu", 20);
    auto engine = std::make_unique<FakeEngine>();
    if (gpu) engine->device = DeviceFigures{4096, 8192, 1024, 0.25, 1.5, 0.125, 0.5, 0.0625, 0.375};
    auto loop = Loop(job, std::move(engine));
    std::unique_ptr<RankStatus> status = RankStatus::CreateAnonymous();
    loop->set_metrics(status.get());
    absl::StatusOr<TrainResult> r = loop->Run();
    ASSERT_TRUE(r.ok()) << r.status();
    const RankFigures f = status->Snapshot();
    EXPECT_EQ(f.has_device, gpu);
    absl::StatusOr<std::string> report = ReadFile(job.output.dir + "/ranks/rank-0.json");
    ASSERT_TRUE(report.ok()) << report.status();
    const nlohmann::json j = nlohmann::json::parse(*report);
    EXPECT_EQ(j.contains("gpu"), gpu);
    // Every step line of metrics.jsonl carries the process's own GPU peak (what the GPU check's
    // benchmark reads instead of nvidia-smi); a CPU engine's lines have none.
    absl::StatusOr<std::string> metrics = ReadFile(job.output.dir + "/metrics.jsonl");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    int step_lines = 0;
    for (const absl::string_view line : absl::StrSplit(*metrics, '\n', absl::SkipEmpty())) {
      const nlohmann::json m = nlohmann::json::parse(line);
      if (!m.contains("loss")) continue;
      ++step_lines;
      EXPECT_EQ(m.contains("gpu_peak_allocated_bytes"), gpu) << line;
      if (gpu) {
        EXPECT_EQ(m["gpu_peak_allocated_bytes"], 8192) << line;
      }
    }
    EXPECT_GT(step_lines, 0);
    if (!gpu) continue;
    EXPECT_EQ(f.device.allocated_bytes, 4096u);
    EXPECT_EQ(f.device.peak_allocated_bytes, 8192u);
    EXPECT_EQ(f.device.arena_bytes, 1024u);
    EXPECT_DOUBLE_EQ(f.device.step_seconds, 0.25);
    EXPECT_DOUBLE_EQ(f.device.busy_seconds_total, 1.5);
    EXPECT_EQ(j["gpu"]["peak_allocated_bytes"], 8192);
    EXPECT_EQ(j["gpu"]["arena_bytes"], 1024);
    EXPECT_DOUBLE_EQ(j["gpu"]["busy_seconds"].get<double>(), 1.5);
    EXPECT_DOUBLE_EQ(j["gpu"]["comm_seconds"].get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(j["gpu"]["exposed_comm_seconds"].get<double>(), 0.375);
    EXPECT_DOUBLE_EQ(f.device.exposed_comm_seconds, 0.0625);
    EXPECT_DOUBLE_EQ(f.device.exposed_comm_seconds_total, 0.375);
  }
}

TEST_F(TrainLoopTest, AStopRequestCheckpointsAndAResumeContinuesLikeAnUninterruptedRun) {
  // 20 rows, global batch 8: 3 steps an epoch (8, 8, 4), 2 epochs, shuffled.
  auto job_for = [&](const std::string& out) {
    JobSpec job = Job(out, 20);
    job.train.global_batch_size = 8;
    job.train.epochs = 2;
    job.data.shuffle = true;
    job.train.lr_schedule = jobspec::LrScheduleKind::kLinear;
    job.train.warmup_steps = 2;
    return job;
  };
  const JobSpec whole_job = job_for("whole");
  auto whole_engine = std::make_unique<FakeEngine>();
  FakeEngine* whole = whole_engine.get();
  std::unique_ptr<TrainLoop> whole_loop = Loop(whole_job, std::move(whole_engine));
  absl::StatusOr<TrainResult> r = whole_loop->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->steps, 6);

  // Stopped during step 5 (epoch 2, its second global batch): the step finishes, is
  // checkpointed, and the run returns interrupted.
  const JobSpec job = job_for("stopped");
  std::atomic<bool> stop{false};
  auto first_engine = std::make_unique<FakeEngine>();
  FakeEngine* first = first_engine.get();
  first->on_micro = [&](int64_t step) {
    if (step == 4) stop.store(true);
  };
  std::unique_ptr<TrainLoop> first_loop = Loop(job, std::move(first_engine));
  r = first_loop->Run(&stop);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->interrupted);
  EXPECT_EQ(r->steps, 5);
  EXPECT_EQ(first->calls.back(), "save@5");
  EXPECT_EQ(exports_.size(), 1u);  // the uninterrupted run's only
  const std::vector<std::string> cps = ListShardedCheckpoints(job.output.dir);
  ASSERT_EQ(cps.size(), 1u);
  absl::StatusOr<CheckpointMeta> meta = ReadCheckpointMeta(cps[0]);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step, 5);
  EXPECT_EQ(meta->epoch, 1);
  EXPECT_EQ(meta->cursor, 2);
  int64_t seen = 0;  // rows of the first 5 steps in the uninterrupted run
  for (const auto& m : whole->micro_batches) {
    if (m.step < 5) seen += static_cast<int64_t>(m.examples.size());
  }
  EXPECT_EQ(meta->samples_seen, seen);

  // Resumed: the same position, then exactly the uninterrupted run's remaining micro-batches
  // (examples, weights, dropout seeds), learning rates, final weight and metrics.
  auto second_engine = std::make_unique<FakeEngine>();
  FakeEngine* second = second_engine.get();
  stop.store(false);
  std::unique_ptr<TrainLoop> second_loop = Loop(job, std::move(second_engine));
  r = second_loop->Run(&stop);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->interrupted);
  EXPECT_EQ(r->steps, 6);
  EXPECT_EQ(second->calls.front(), "load@5");
  const std::vector<FakeEngine::MicroBatchCall> rest(whole->micro_batches.end() - 2,
                                                     whole->micro_batches.end());
  ASSERT_EQ(second->micro_batches.size(), 2u);  // step 6 only: 2 micro-batches
  EXPECT_EQ(second->micro_batches, rest);
  EXPECT_EQ(second->lrs, std::vector<double>(whole->lrs.end() - 1, whole->lrs.end()));
  EXPECT_EQ(second->w(), whole->w());
  EXPECT_EQ(Lines(job.output.dir + "/metrics.jsonl"),
            Lines(whole_job.output.dir + "/metrics.jsonl"));
}

TEST_F(TrainLoopTest, ANonFiniteLossIsDivergedNamingTheStepAndNotCheckpointed) {
  JobSpec job = Job("out", 40);
  job.output.checkpoint_every_steps = 1;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  fake->nan_loss_at_step = 3;
  absl::StatusOr<TrainResult> r = Loop(job, std::move(engine))->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsDiverged(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("loss is nan at step 3 (fp32)"));
  const std::vector<std::string> cps = ListShardedCheckpoints(job.output.dir);
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_THAT(cps.back(), HasSubstr("step-00000002"));
  EXPECT_TRUE(exports_.empty());
  EXPECT_EQ(Lines(job.output.dir + "/metrics.jsonl").size(), 2u);
}

TEST_F(TrainLoopTest, AnInfiniteGradientNormIsDivergedNamingTheStep) {
  JobSpec job = Job("out", 40);
  job.output.checkpoint_every_steps = 1;
  auto engine = std::make_unique<FakeEngine>();
  engine->inf_grad_at_step = 1;
  absl::StatusOr<TrainResult> r = Loop(job, std::move(engine))->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsDiverged(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("gradient norm is inf at step 1 (fp32)"));
  EXPECT_TRUE(ListShardedCheckpoints(job.output.dir).empty());
}

// A run stopped at step 2 of 4 (the checkpoint of step 2 is the latest).
class TrainLoopResumeTest : public TrainLoopTest {
 protected:
  JobSpec Stopped(const std::string& out) {
    JobSpec job = Job(out, 40);  // 4 steps
    job.output.checkpoint_every_steps = 2;
    std::atomic<bool> stop{false};
    auto engine = std::make_unique<FakeEngine>();
    engine->on_micro = [&](int64_t step) {
      if (step == 1) stop.store(true);
    };
    absl::StatusOr<TrainResult> r = Loop(job, std::move(engine))->Run(&stop);
    EXPECT_TRUE(r.ok() && r->interrupted && r->steps == 2) << r.status();
    return job;
  }
  std::string JobYaml(const JobSpec& job) {
    return ReadFile(job.output.dir + "/job.yaml").value_or("(none)");
  }
};

TEST_F(TrainLoopResumeTest, ChangedTrajectorySettingsAreRefusedNamingEachKeyAndNothingIsWritten) {
  JobSpec job = Stopped("out");
  const std::string yaml = JobYaml(job);
  const std::vector<std::string> metrics = Lines(job.output.dir + "/metrics.jsonl");
  job.train.lr = 0.2;
  job.train.global_batch_size = 20;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  std::unique_ptr<TrainLoop> loop1 = Loop(job, std::move(engine));
  absl::StatusOr<TrainResult> r = loop1->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsSettingsChanged(r.status())) << r.status();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("step-00000002 was written by a run with other"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("train.global_batch_size 10 -> 20, train.lr 0.1 -> 0.2."));
  EXPECT_TRUE(fake->calls.empty());  // nothing loaded, nothing saved
  EXPECT_EQ(JobYaml(job), yaml);
  EXPECT_EQ(Lines(job.output.dir + "/metrics.jsonl"), metrics);
  EXPECT_FALSE(IsSettingsChanged(absl::FailedPreconditionError("other")));
}

TEST_F(TrainLoopResumeTest, TheSplitOfAGlobalBatchIsNotATrajectorySetting) {
  JobSpec job = Stopped("out");
  job.train.micro_batch_size = 2;
  job.train.precision = Precision::kFp32;
  job.distributed.sharding = Sharding::kFullShard;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  std::unique_ptr<TrainLoop> loop2 = Loop(job, std::move(engine));
  absl::StatusOr<TrainResult> r = loop2->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(fake->calls.front(), "load@2");
  EXPECT_EQ(r->steps, 4);
}

TEST_F(TrainLoopResumeTest, ForceResumesDespiteChangedSettingsAndRecordsTheNewJob) {
  JobSpec job = Stopped("out");
  job.train.lr = 0.2;
  job.train.resume = ResumeMode::kForce;
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  std::unique_ptr<TrainLoop> loop3 = Loop(job, std::move(engine));
  absl::StatusOr<TrainResult> r = loop3->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(fake->calls.front(), "load@2");
  EXPECT_EQ(r->steps, 4);
  EXPECT_THAT(JobYaml(job), HasSubstr("lr: 0.2\n"));
  // The checkpoints written from here on carry the new settings.
  absl::StatusOr<CheckpointMeta> meta =
      ReadCheckpointMeta(ListShardedCheckpoints(job.output.dir).back());
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->settings.at("train.lr"), "0.2");
}

TEST_F(TrainLoopResumeTest, NeverStartsOverOnAFirstAttemptAndResumesOnARestart) {
  JobSpec job = Stopped("out");
  job.train.resume = ResumeMode::kNever;
  job.train.lr = 0.2;
  fs::create_directories(job.output.dir + "/final");
  // A restart of the job (TORCHELASTIC_RESTART_COUNT 1): its own checkpoints are resumed.
  {
    auto engine = std::make_unique<FakeEngine>();
    FakeEngine* fake = engine.get();
    std::unique_ptr<TrainLoop> loop4 = Loop(job, std::move(engine), 0, /*restart_count=*/1);
    absl::StatusOr<TrainResult> r = loop4->Run();
    ASSERT_FALSE(r.ok());  // the checkpoint is of lr 0.1: under `never`, compared as `auto`
    EXPECT_TRUE(IsSettingsChanged(r.status())) << r.status();
    EXPECT_TRUE(fake->calls.empty());
  }
  // The first attempt: everything of the previous run goes, training starts at step 1.
  auto engine = std::make_unique<FakeEngine>();
  FakeEngine* fake = engine.get();
  std::unique_ptr<TrainLoop> loop5 = Loop(job, std::move(engine));
  absl::StatusOr<TrainResult> r = loop5->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  for (const std::string& c : fake->calls) EXPECT_EQ(c.rfind("load", 0), std::string::npos) << c;
  EXPECT_EQ(r->steps, 4);
  std::vector<int64_t> steps;
  for (const std::string& l : Lines(job.output.dir + "/metrics.jsonl")) {
    steps.push_back(nlohmann::json::parse(l)["step"].get<int64_t>());
  }
  EXPECT_THAT(steps, ElementsAre(1, 2, 3, 4));
  EXPECT_FALSE(fs::exists(job.output.dir + "/final"));  // the fake export writes nothing
}

TEST_F(TrainLoopResumeTest, AFinishedRunWithItsExportTrainsNothing) {
  JobSpec job = Job("out", 40);
  auto engine = std::make_unique<FakeEngine>();
  ASSERT_TRUE(Loop(job, std::move(engine), /*eval_rows=*/4)->Run().ok());
  // Without final/ (an export that did not happen) a finished checkpoint resumes and exports.
  {
    auto again = std::make_unique<FakeEngine>();
    FakeEngine* fake = again.get();
    std::unique_ptr<TrainLoop> loop6 = Loop(job, std::move(again), 4);
    absl::StatusOr<TrainResult> r = loop6->Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->already_finished);
    EXPECT_EQ(fake->calls.front(), "load@4");
    EXPECT_EQ(exports_.size(), 2u);
  }
  const fs::path final_dir = fs::path(job.output.dir) / "final";
  fs::create_directories(final_dir);
  ASSERT_TRUE(WriteFileAtomic((final_dir / "config.json").string(), "{}").ok());
  ASSERT_TRUE(WriteFileAtomic((final_dir / "model.safetensors").string(), "x").ok());
  const std::vector<std::string> metrics = Lines(job.output.dir + "/metrics.jsonl");
  const nlohmann::json last_eval = nlohmann::json::parse(metrics.back());
  auto again = std::make_unique<FakeEngine>();
  FakeEngine* fake = again.get();
  std::unique_ptr<TrainLoop> loop7 = Loop(job, std::move(again), 4);
  absl::StatusOr<TrainResult> r = loop7->Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->already_finished);
  EXPECT_EQ(r->steps, 4);
  EXPECT_EQ(r->export_dir, final_dir.string());
  EXPECT_EQ(r->eval_step, 4);
  EXPECT_DOUBLE_EQ(r->eval.accuracy, last_eval["eval_accuracy"].get<double>());
  EXPECT_THAT(fake->calls, ElementsAre("load@4"));  // no step, no save, no gather
  EXPECT_EQ(exports_.size(), 2u);
  EXPECT_EQ(Lines(job.output.dir + "/metrics.jsonl"), metrics);
}

TEST_F(TrainLoopTest, OtherErrorsAreNotDiverged) {
  EXPECT_FALSE(IsDiverged(absl::InternalError("loss is nan")));
  EXPECT_TRUE(IsDiverged(Diverged("x")));
}

}  // namespace
}  // namespace ringmaster::trainer
