// ctest-labels: gpu
// Several CUDA ranks (issue #19): 2 and 4 ranks, each a thread with its own device and NCCL
// communicators, train a small BERT for 3 AdamW steps in each of the four sharding modes, and
// everything is checked against ONE CPU model that sees every rank's micro-batches (BertModel
// <float>, ClipGradNorm, AdamW): each step's global loss, flag sum and gradient norm, and the
// weights after the last step (within 1e-5 of each tensor's scale, ExpectWeightsMatch). One rank
// has no samples in one micro-batch (the empty pass must issue the same collectives). The
// checkpoint ranges the ranks save tile the layout and hold the CPU's AdamW moments, and the
// state they form resumes in a world of one (another world size) and takes a fourth step equal
// to the CPU's. no_shard also runs with gradient buckets (distributed.bucket_cap_mb: two buckets of
// two units each), equal to the same CPU model; every no_shard run issues one all-reduce per
// bucket per step (counted through a TracedCommunicator). Needs as many devices as ranks (the
// emulator: CUDA_EMU_DEVICES=4); skips (exit 77) without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "trainer/comm/nccl_communicator.h"
#include "trainer/comm/store.h"
#include "trainer/comm/traced_communicator.h"
#include "trainer/cuda/engine/cuda_trainer_state.h"
#include "trainer/cuda/testing/gpu_test_batch.h"
#include "trainer/cuda/testing/gpu_test_compare.h"
#include "trainer/cuda/testing/gpu_test_tolerance.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/model/bert_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/parallel/grad_buckets.h"

namespace ringmaster::trainer::cuda {
namespace {

constexpr double kLr = 2e-5;
constexpr double kMaxGradNorm = 0.1;  // low enough that clipping acts
// Relative tolerances of the global loss and gradient norm: the emulator's (exact GEMMs; the
// ranks' sums are in double, rank order) and a real GPU's (cuBLAS's summation order, derived in
// gpu_test_tolerance.h); the weights: ExpectWeightsMatch.
constexpr double kLossTol = GpuTolerance(1e-5, kGpuLogitTolerance);
constexpr double kNormTol = GpuTolerance(1e-4, kGpuGradScaleTolerance);
constexpr int kMicro = 2;  // micro-batches per rank and step, 2 rows each
constexpr int kRows = 2;

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// The micro-batches of a step: rank r's m-th, or none (the last rank's second one in step 1).
bool HasSamples(int step, int rank, int micro, int world) {
  return !(step == 1 && rank == world - 1 && micro == kMicro - 1);
}
uint32_t BatchSeed(int step, int rank, int micro) { return 1000 * step + 10 * rank + micro; }
uint64_t DropoutSeed(int step, int rank, int micro) { return 7000 + BatchSeed(step, rank, micro); }
float Weight(int step, int world) {
  int rows = 0;
  for (int r = 0; r < world; ++r) {
    for (int m = 0; m < kMicro; ++m) rows += HasSamples(step, r, m, world) ? kRows : 0;
  }
  return static_cast<float>(kRows) / static_cast<float>(rows);
}

// The CPU reference: one model over every rank's micro-batches of each step.
struct CpuReference {
  BertConfig config;
  ParamLayout layout;
  std::vector<float> params, grads;
  std::unique_ptr<BertModel<float>> model;
  std::unique_ptr<AdamW> adam;
  std::vector<double> loss, norm;

  CpuReference(const BertConfig& c, const std::vector<float>& initial)
      : config(c), layout(MakeBertParamLayout(c)), params(initial), grads(initial.size()) {
    model = std::make_unique<BertModel<float>>(config, layout);
    adam = std::make_unique<AdamW>(layout, AdamWOptions{});
  }
  void Step(int step, int world) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    const float w = Weight(step, world);
    double l = 0;
    for (int r = 0; r < world; ++r) {
      for (int m = 0; m < kMicro; ++m) {
        if (!HasSamples(step, r, m, world)) continue;
        const TestMicroBatch mb = MakeTestMicroBatch(config, BatchSeed(step, r, m), kRows);
        l += w * model->Forward(params.data(), mb.Inputs(), true, DropoutSeed(step, r, m));
        model->Backward(params.data(), grads.data(), w);
      }
    }
    loss.push_back(l);
    norm.push_back(ClipGradNorm(grads.data(), grads.size(), kMaxGradNorm));
    adam->Step(params.data(), grads.data(), kLr);
  }
};

// One rank's results.
struct RankResult {
  std::string error;
  std::vector<double> loss, norm, flags;
  std::vector<std::optional<double>> join_lag;  // per step: last_join_lag_seconds()
  std::vector<float> params;                    // gathered after the last step
  ShardRanges saved;
  std::vector<float> p, m, v;  // what it would write to a checkpoint
  DeviceFigures device;        // GPU time, of which in collectives
  int all_reduces = 0;         // AllReduceSum entered on the world communicator
};

// Counts the all-reduces a rank issues.
class AllReduceCounter : public CollectiveObserver {
 public:
  void OnEnter(uint64_t, Collective op) override {
    if (op == Collective::kAllReduceSum) ++all_reduces;
  }
  void OnLeave(uint64_t, Collective, double) override {}
  std::atomic<int> all_reduces{0};
};

// no_shard's bucket cap in these tests: the head and the last layer fill a bucket, so backward
// makes two buckets of two units ({layer 1, head}, then {embeddings, layer 0}).
size_t TestBucketCap(const ParamLayout& layout) {
  const UnitShards parts = UnitShards::Make(layout, 0, 1);
  const size_t units = parts.units.size();
  return (parts.units[units - 1].numel + parts.units[units - 2].numel) * sizeof(float);
}

// The communicators of rank `r` of `world`: the world, and for hybrid_shard the node groups of
// `local` ranks (intra) and the ranks with the same local index (inter). Each group rendezvous
// in its own store.
struct Groups {
  FakeStore world_store;
  std::vector<std::unique_ptr<FakeStore>> intra_stores, inter_stores;
  Groups(int world, int local) {
    for (int i = 0; i < world / local; ++i) intra_stores.push_back(std::make_unique<FakeStore>());
    for (int i = 0; i < local; ++i) inter_stores.push_back(std::make_unique<FakeStore>());
  }
};

std::vector<RankResult> TrainRanks(const BertConfig& config, const std::vector<float>& initial,
                                   int world, Sharding sharding, int local,
                                   size_t bucket_cap_bytes) {
  const bool hybrid = sharding == Sharding::kHybridShard;
  Groups groups(world, local);
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankResult& out = results[r];
      auto fail = [&](const std::string& what) {
        out.error = absl::StrCat("rank ", r, ": ", what);
      };
      if (cudaSetDevice(r) != cudaSuccess) return fail("cudaSetDevice");
      const absl::Duration timeout = absl::Seconds(120);
      auto world_comm = NcclCommunicator::Create(groups.world_store, r, world, r, timeout);
      if (!world_comm.ok()) return fail(world_comm.status().ToString());
      AllReduceCounter counter;
      std::atomic<uint64_t> seq{0};
      TracedCommunicator traced(world_comm->get(), &counter, &seq);
      std::unique_ptr<Communicator> intra, inter;
      DataParallelComms comms{&traced, nullptr, nullptr};
      if (hybrid) {
        auto a =
            NcclCommunicator::Create(*groups.intra_stores[r / local], r % local, local, r, timeout);
        if (!a.ok()) return fail(a.status().ToString());
        auto b = NcclCommunicator::Create(*groups.inter_stores[r % local], r / local, world / local,
                                          r, timeout);
        if (!b.ok()) return fail(b.status().ToString());
        intra = *std::move(a);
        inter = *std::move(b);
        comms.intra = intra.get();
        comms.inter = inter.get();
      }
      CudaTrainerOptions options;
      options.sharding = sharding;
      options.bucket_cap_bytes = bucket_cap_bytes;
      // Plain all-reduces, counted below (one per bucket per step); with zero-block skipping a
      // sparse bucket (the embeddings) goes as an all-to-all and an all-gather instead.
      options.compression.skip_zero_blocks = false;
      const ParamLayout layout = MakeBertParamLayout(config);
      auto state = CudaTrainerState::Create(config, layout, initial, options, comms);
      if (!state.ok()) return fail(state.status().ToString());
      for (int step = 0; step < 3; ++step) {
        if (!(*state)->BeginStep().ok()) return fail("BeginStep");
        const float w = Weight(step, world);
        double local_loss = 0;
        for (int m = 0; m < kMicro; ++m) {
          const bool last = m == kMicro - 1;
          if (!HasSamples(step, r, m, world)) {
            if (absl::Status s = (*state)->EmptyMicroBatch(last); !s.ok())
              return fail(s.ToString());
            continue;
          }
          const TestMicroBatch mb = MakeTestMicroBatch(config, BatchSeed(step, r, m), kRows);
          absl::StatusOr<float> loss =
              (*state)->ForwardBackward(mb.Inputs(), w, DropoutSeed(step, r, m), last);
          if (!loss.ok()) return fail(loss.status().ToString());
          local_loss += w * *loss;
        }
        absl::StatusOr<StepOutcome> o =
            (*state)->FinishStep(kLr, kMaxGradNorm, local_loss, r == 0 ? 1.0f : 0.0f);
        if (!o.ok()) return fail(o.status().ToString());
        out.loss.push_back(o->loss);
        out.norm.push_back(o->grad_norm);
        out.flags.push_back(o->flag_sum);
        out.join_lag.push_back((*state)->data_parallel().last_join_lag_seconds());
      }
      absl::StatusOr<std::vector<float>> params = (*state)->DownloadParams();
      if (!params.ok()) return fail(params.status().ToString());
      out.params = *std::move(params);
      out.device = (*state)->figures();
      out.all_reduces = counter.all_reduces.load();
      const CudaDataParallel& dp = (*state)->data_parallel();
      out.saved = dp.SaveRanges();
      if (absl::Status s = dp.CopyForSave(&out.p, &out.m, &out.v); !s.ok()) {
        return fail(s.ToString());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

struct Case {
  int world;
  Sharding sharding;
  int local;             // ranks per node (hybrid_shard)
  bool buckets = false;  // no_shard: TestBucketCap's buckets instead of one per unit
};

class CudaDataParallelTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDataParallelTest, MatchesOneCpuModelAndResumesInAWorldOfOne) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  if (DeviceCount() < c.world) {
    GTEST_SKIP() << "needs " << c.world << " CUDA devices (one per NCCL rank); found "
                 << DeviceCount();
  }
  const BertConfig config = SmallTestConfig();
  const ParamLayout layout = MakeBertParamLayout(config);
  std::vector<float> initial(layout.total);
  InitBertParams(config, layout, 5, initial.data());

  CpuReference cpu(config, initial);
  for (int step = 0; step < 3; ++step) cpu.Step(step, c.world);
  const size_t cap = c.buckets ? TestBucketCap(layout) : 0;
  const std::vector<RankResult> ranks =
      TrainRanks(config, initial, c.world, c.sharding, c.local, cap);
  // no_shard's gradient reductions: one all-reduce per bucket per step, nothing else on the
  // world communicator is an all-reduce (the step's sums are an all-gather).
  int buckets = 0;
  if (c.sharding == Sharding::kNoShard) {
    auto b = GradBuckets::Make(UnitShards::Make(layout, 0, 1).units, cap);
    ASSERT_TRUE(b.ok()) << b.status();
    buckets = static_cast<int>(b->buckets.size());
    ASSERT_EQ(buckets, c.buckets ? 2 : 4);
  }

  // Every rank: the same global figures as the CPU, the same weights.
  for (int r = 0; r < c.world; ++r) {
    const RankResult& got = ranks[r];
    ASSERT_TRUE(got.error.empty()) << got.error;
    for (int step = 0; step < 3; ++step) {
      EXPECT_NEAR(got.loss[step], cpu.loss[step], kLossTol * cpu.loss[step]) << "rank " << r;
      EXPECT_NEAR(got.norm[step], cpu.norm[step], kNormTol * cpu.norm[step]) << "rank " << r;
      EXPECT_EQ(got.flags[step], 1.0) << "rank " << r << " step " << step;
      EXPECT_GT(cpu.norm[step], kMaxGradNorm) << "the test should exercise clipping";
    }
    ExpectWeightsMatch(layout, cpu.params, got.params, kLr, 3);
    EXPECT_EQ(got.params, ranks[0].params) << "rank " << r << " differs from rank 0";
    if (c.sharding == Sharding::kNoShard) {
      EXPECT_EQ(got.all_reduces, 3 * buckets) << "rank " << r;
    }
    // The step's collectives were timed on the stream, within the GPU time of the steps.
    EXPECT_GT(got.device.comm_seconds_total, 0.0) << "rank " << r;
    EXPECT_LE(got.device.comm_seconds_total, got.device.busy_seconds_total) << "rank " << r;
    // The exposed part (the compute stream's timed waits for the communication stream and the
    // collectives on it, the step's sums at least): intervals of the compute stream inside the
    // steps, so within their GPU time.
    EXPECT_GT(got.device.exposed_comm_seconds_total, 0.0) << "rank " << r;
    EXPECT_LE(got.device.exposed_comm_seconds_total, got.device.busy_seconds_total) << "rank " << r;
    EXPECT_GT(got.device.exposed_comm_seconds, 0.0) << "rank " << r << ": the last step's";
    EXPECT_LE(got.device.exposed_comm_seconds, got.device.exposed_comm_seconds_total);
    // Those two alone stay above 0 with the waits timed wrong; the waits themselves: each step's
    // join at Reduce (the compute stream's timed wait for the communication stream) ended no
    // earlier than the event it waited for. Under lazy streams (the _lazy test) that event is
    // recorded only when the wait runs the communication stream, so a wait's second event
    // recorded before the wait (a stall of ~0) ends before it, by the host time that took.
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(got.join_lag[step].has_value()) << "rank " << r << " step " << step;
      EXPECT_GE(*got.join_lag[step], 0.0)
          << "rank " << r << " step " << step << ": the timed wait ended before what it awaited";
    }
  }

  // The checkpoint: the ranks' saved ranges tile the layout exactly once, with the gathered
  // weights and the CPU's AdamW moments.
  std::vector<float> p(layout.total), m(layout.total), v(layout.total);
  std::vector<int> written(layout.total, 0);
  for (const RankResult& got : ranks) {
    size_t pos = 0;
    for (const auto& [b, e] : got.saved.ranges) {
      for (size_t i = b; i < e; ++i, ++pos) {
        ++written[i];
        p[i] = got.p[pos];
        m[i] = got.m[pos];
        v[i] = got.v[pos];
      }
    }
    ASSERT_EQ(pos, got.p.size());
  }
  for (size_t i = 0; i < layout.total; ++i) ASSERT_EQ(written[i], 1) << "element " << i;
  EXPECT_EQ(p, ranks[0].params);
  if (kEmulatedGpu) {
    ExpectWeightsMatch(layout, cpu.adam->exp_avg(), m, kLr, 3);
  } else {
    // On a GPU the first moments carry the gradients' summation-order error: within
    // kGpuGradScaleTolerance of each tensor's moment scale (attention key biases, whose true
    // gradient is zero, hold rounding noise: not compared).
    for (const ParamSpec& s : layout.specs) {
      if (s.name.find("attention.self.key.bias") != std::string::npos) continue;
      double scale = 1e-30, worst = 0;
      for (size_t i = s.offset; i < s.offset + s.numel; ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(cpu.adam->exp_avg()[i])));
        worst = std::max(worst, std::abs(static_cast<double>(cpu.adam->exp_avg()[i]) - m[i]));
      }
      EXPECT_LE(worst, kGpuGradScaleTolerance * scale) << "first moments of " << s.name;
    }
  }
  double worst_v = 0, scale_v = 1e-30;
  for (size_t i = 0; i < layout.total; ++i) {
    scale_v = std::max(scale_v, static_cast<double>(cpu.adam->exp_avg_sq()[i]));
    worst_v = std::max(worst_v, std::abs(static_cast<double>(cpu.adam->exp_avg_sq()[i]) - v[i]));
  }
  // v sums squared gradients: twice their relative error on a GPU.
  EXPECT_LE(worst_v, GpuTolerance(1e-4, 2 * kGpuGradScaleTolerance) * scale_v) << "second moments";

  // Resume that state in a world of one and take a fourth step with every rank's batches.
  auto single = CudaTrainerState::Create(config, layout, initial, CudaTrainerOptions{});
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE((*single)->Upload(p, m, v, 3).ok());
  cpu.Step(3, c.world);
  ASSERT_TRUE((*single)->BeginStep().ok());
  const float w = Weight(3, c.world);
  for (int r = 0; r < c.world; ++r) {
    for (int mi = 0; mi < kMicro; ++mi) {
      const TestMicroBatch mb = MakeTestMicroBatch(config, BatchSeed(3, r, mi), kRows);
      ASSERT_TRUE((*single)->ForwardBackward(mb.Inputs(), w, DropoutSeed(3, r, mi)).ok());
    }
  }
  absl::StatusOr<StepOutcome> o = (*single)->FinishStep(kLr, kMaxGradNorm);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_NEAR(o->grad_norm, cpu.norm[3], kNormTol * cpu.norm[3]);
  EXPECT_EQ((*single)->figures().comm_seconds_total, 0.0) << "a world of one communicates";
  EXPECT_EQ((*single)->figures().exposed_comm_seconds_total, 0.0)
      << "a world of one waits for communication";
  EXPECT_FALSE((*single)->data_parallel().last_join_lag_seconds().has_value())
      << "a world of one joins a communication stream";
  absl::StatusOr<std::vector<float>> after = (*single)->DownloadParams();
  ASSERT_TRUE(after.ok());
  ExpectWeightsMatch(layout, cpu.params, *after, kLr, 4);
}

INSTANTIATE_TEST_SUITE_P(
    WorldsAndShardings, CudaDataParallelTest,
    ::testing::Values(Case{2, Sharding::kNoShard, 2}, Case{2, Sharding::kShardGradOp, 2},
                      Case{2, Sharding::kFullShard, 2}, Case{2, Sharding::kHybridShard, 1},
                      Case{4, Sharding::kNoShard, 4}, Case{4, Sharding::kShardGradOp, 4},
                      Case{4, Sharding::kFullShard, 4}, Case{4, Sharding::kHybridShard, 2},
                      Case{2, Sharding::kNoShard, 2, true}, Case{4, Sharding::kNoShard, 4, true}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat("world", info.param.world, "_",
                          std::string(ShardingName(info.param.sharding)),
                          info.param.buckets ? "_buckets" : "");
    });

}  // namespace
}  // namespace ringmaster::trainer::cuda
