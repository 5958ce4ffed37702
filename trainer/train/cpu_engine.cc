#include "trainer/train/cpu_engine.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/model/cpu_isa.h"
#include "trainer/model/omp_wait_default.h"

namespace ringmaster::trainer {

namespace {

BertInputs InputsOf(const Batch& b) {
  return {b.batch_size,
          b.seq_len,
          b.input_ids.data(),
          b.token_type_ids.data(),
          b.attention_mask.data(),
          b.labels.data()};
}

// `compression: auto` on CPU ranks spread over several nodes (no tensor cores to spare, so the
// link decides; ranks of one node talk over loopback and never compress): rank 0 times a 4 MiB
// all-reduce and picks int8 (valid under every sharding) when the bus bandwidth
// is below `threshold` (RINGMASTER_SLOW_LINK_GBITS, default 5 Gbit/s), none otherwise; the
// choice is broadcast so every rank agrees.
absl::StatusOr<WireCodec> ChooseAutoCodec(Communicator& world, double threshold) {
  std::vector<float> buf(1 << 20, 1.0f);
  RM_RETURN_IF_ERROR(world.AllReduceSum(buf.data(), buf.size()));  // warm-up: connections
  RM_RETURN_IF_ERROR(world.Barrier());
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kIters = 3;
  for (int i = 0; i < kIters; ++i) RM_RETURN_IF_ERROR(world.AllReduceSum(buf.data(), buf.size()));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters;
  const double n = world.size();
  const double bus_gbits = buf.size() * sizeof(float) * 8.0 * 2.0 * (n - 1) / n / secs / 1e9;
  std::vector<float> decision = {bus_gbits < threshold ? 1.0f : 0.0f};
  RM_RETURN_IF_ERROR(world.Broadcast(decision.data(), 1, 0));
  if (world.rank() == 0) {
    LogInfo(
        absl::StrFormat("compression auto: all-reduce bus bandwidth %.2f Gbit/s %s %.2f Gbit/s: %s",
                        bus_gbits, bus_gbits < threshold ? "<" : ">=", threshold,
                        decision[0] > 0 ? "int8 with error feedback" : "none"));
  }
  return decision[0] > 0 ? WireCodec::kInt8 : WireCodec::kNone;
}

}  // namespace

CpuEngineOptions CpuEngineOptionsFor(const JobSpec& job, const RankSettings& settings) {
  CpuEngineOptions o;
  o.slowdown = Slowdown(settings.slowdown);
  o.slow_link_gbits = settings.slow_link_gbits;
  DataParallelOptions& dpo = o.dp;
  dpo.sharding = job.distributed.sharding;
  SetCompression(settings.compression, job.distributed.powersgd_rank, &dpo);
  // auto: the codec stays none until ResolveAutoCompression has measured the links.
  o.auto_compression = settings.compression == jobspec::Compression::kAuto;
  dpo.adam = AdamWOptions{job.train.adam_beta1, job.train.adam_beta2, job.train.adam_eps,
                          job.train.weight_decay};
  dpo.seed = job.train.seed;
  dpo.skip_zero_blocks = job.distributed.skip_zero_blocks;
  dpo.bucket_cap_bytes = BucketCapBytes(job.distributed.bucket_cap_mb);
  o.powersgd_start_step = job.distributed.powersgd_start_step;
  o.gradient_checkpointing = job.train.gradient_checkpointing;
  return o;
}

absl::Status ResolveAutoCompression(DistContext& dist, CpuEngineOptions* options) {
  if (!options->auto_compression || dist.world_size() <= 1) return absl::OkStatus();
  if (dist.env().num_nodes > 1) {
    RM_ASSIGN_OR_RETURN(options->dp.codec,
                        ChooseAutoCodec(*dist.world(), options->slow_link_gbits));
  } else if (dist.rank() == 0) {
    LogInfo("compression auto: all ranks on one node: none");
  }
  return absl::OkStatus();
}

CpuEngine::CpuEngine(const BertConfig& config, const ParamLayout& layout, const Slowdown& slowdown,
                     bool gradient_checkpointing, int rank, int world_size)
    : layout_(layout), slowdown_(slowdown), rank_(rank), world_size_(world_size) {
  net_ = std::make_unique<BertModel<float>>(config, layout_, gradient_checkpointing);
}

absl::StatusOr<std::unique_ptr<CpuEngine>> CpuEngine::Create(
    const CpuEngineOptions& options, const BertConfig& config, const ParamLayout& layout,
    const float* initial, int64_t total_steps, int64_t warmup_steps, DistContext& dist) {
  DataParallelOptions dpo = options.dp;
  // Default (-1): exact all-reduces through the LR warmup and at least the first tenth of the
  // run, where PyTorch's PowerSGD hook advises starting to tune start_powerSGD_iter.
  dpo.powersgd_start_step = options.powersgd_start_step >= 0
                                ? options.powersgd_start_step
                                : std::max<int64_t>(warmup_steps, total_steps / 10);
  std::unique_ptr<CpuEngine> e(new CpuEngine(config, layout, options.slowdown,
                                             options.gradient_checkpointing, dist.rank(),
                                             dist.world_size()));
  DataParallelComms comms{dist.world(), dist.intra(), dist.inter()};
  RM_ASSIGN_OR_RETURN(e->dp_, DataParallel::Create(e->layout_, dpo, comms, initial));
  if (e->net_->gradient_checkpointing() && dist.rank() == 0) {
    LogInfo("gradient checkpointing: backward recomputes each encoder layer's forward");
  }
  if (dist.rank() == 0) {
    LogInfo(absl::StrFormat("cpu: elementwise loops %s, %d OpenMP threads, OpenMP waits %s",
                            cpu::IsaName(cpu::ActiveIsa()), omp_get_max_threads(),
                            cpu::OmpWaitPolicyDescription()));
  }
  return e;
}

absl::StatusOr<float> CpuEngine::TrainMicroBatch(const Batch& batch, const MicroBatchArgs& args) {
  dp_->BeginMicroBatch(args.last_of_step, /*training=*/true);
  slowdown_.Begin();
  const float loss = net_->Forward(dp_.get(), InputsOf(batch), true, args.dropout_seed);
  dp_->BeginBackward();
  net_->Backward(dp_.get(), args.loss_weight);
  slowdown_.End();
  return loss;
}

void CpuEngine::EmptyMicroBatch(bool last_of_step) {
  dp_->BeginMicroBatch(last_of_step, /*training=*/true);
  dp_->RunEmptyMicroBatch(net_->num_units());
}

absl::StatusOr<StepTotals> CpuEngine::FinishStep(double local_loss, double lr, double max_grad_norm,
                                                 float flag) {
  RM_ASSIGN_OR_RETURN(DataParallel::StepResult r,
                      dp_->FinishStep(local_loss, lr, max_grad_norm, flag));
  return StepTotals{r.loss, r.grad_norm, r.flag_sum};
}

absl::StatusOr<ForwardOutput> CpuEngine::EvalForward(const Batch& batch) {
  dp_->BeginMicroBatch(true, /*training=*/false);
  ForwardOutput out;
  out.loss = net_->Forward(dp_.get(), InputsOf(batch), false, 0);
  out.logits = net_->logits();
  return out;
}

void CpuEngine::EmptyEvalForward() {
  dp_->BeginMicroBatch(true, /*training=*/false);
  dp_->RunEmptyForward(net_->num_units());
}

absl::StatusOr<uint64_t> CpuEngine::SaveCheckpoint(const std::string& output_dir,
                                                   const CheckpointMeta& position, int keep) {
  CheckpointMeta meta = position;
  meta.fingerprint = LayoutFingerprint(layout_);
  meta.total = layout_.total;
  meta.sharding = std::string(ShardingName(dp_->options().sharding));
  std::vector<float> p, m, v;
  dp_->CopyForSave(&p, &m, &v);
  RM_RETURN_IF_ERROR(SaveShardedCheckpoint(output_dir, rank_, world_size_, meta, dp_->SaveRanges(),
                                           p.data(), m.data(), v.data(), keep,
                                           [&] { return dp_->Barrier(); }));
  return static_cast<uint64_t>((p.size() + m.size() + v.size()) * sizeof(float));
}

absl::StatusOr<LoadedShard> CpuEngine::ReadCheckpoint(const std::string& dir) const {
  return LoadShardedCheckpoint(dir, layout_.total, LayoutFingerprint(layout_), dp_->LoadRanges());
}

absl::Status CpuEngine::LoadCheckpoint(const LoadedShard& shard) {
  return dp_->LoadFrom(shard, shard.meta.step);
}

EngineFigures CpuEngine::figures() const {
  EngineFigures f;
  const MemoryStats mem = dp_->memory();
  f.persistent_bytes = mem.persistent_bytes;
  f.peak_transient_bytes = mem.peak_transient_bytes;
  const CommCounters& cc = dp_->counters();
  f.comm =
      CommTotals{cc.gather_bytes.load(), cc.reduce_raw_bytes.load(), cc.reduce_wire_bytes.load()};
  return f;
}

}  // namespace ringmaster::trainer
