#include "trainer/parallel/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

void SetCompression(Compression compression, int powersgd_rank, DataParallelOptions* options) {
  options->powersgd = false;
  options->codec = WireCodec::kNone;
  switch (compression) {
    case Compression::kAuto:
    case Compression::kNone:
      break;
    case Compression::kFp16:
      options->codec = WireCodec::kFp16;
      break;
    case Compression::kBf16:
      options->codec = WireCodec::kBf16;
      break;
    case Compression::kInt8:
      options->codec = WireCodec::kInt8;
      break;
    case Compression::kPowerSgd:
      options->powersgd = true;
      options->powersgd_rank = powersgd_rank;
      break;
  }
}

namespace {

// Keys of the second-stage error-feedback residuals.
constexpr int kKeyHybridInter = -1;

}  // namespace

std::vector<MatrixRange> PowerSgdMatricesFor(const ParamLayout& layout, const UnitShards* shards) {
  std::vector<MatrixRange> mats;
  for (const ParamSpec& s : layout.specs) {
    if (s.shape.size() != 2) continue;
    const size_t rows = static_cast<size_t>(s.shape[0]), cols = static_cast<size_t>(s.shape[1]);
    if (shards == nullptr) {
      mats.push_back({s.offset, rows, cols});
      continue;
    }
    // The whole rows of this matrix that lie in this rank's shard of its unit.
    const UnitShard& u = shards->units[s.unit];
    const size_t ob = u.owned_begin, oe = ob + u.valid;
    const size_t b = std::max(ob, s.offset), e = std::min(oe, s.offset + s.numel);
    if (b >= e) continue;
    const size_t r0 = (b - s.offset + cols - 1) / cols, r1 = (e - s.offset) / cols;
    if (r1 > r0) mats.push_back({u.local + (s.offset + r0 * cols - ob), r1 - r0, cols});
  }
  return mats;
}

DataParallel::DataParallel(const ParamLayout& layout, const DataParallelOptions& options,
                           const DataParallelComms& comms)
    : layout_(layout), options_(options), comms_(comms) {}

DataParallel::~DataParallel() { queue_.Drain().IgnoreError(); }

bool DataParallel::sharded_params() const {
  return options_.sharding == Sharding::kFullShard || options_.sharding == Sharding::kHybridShard;
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(
    const ParamLayout& layout, const DataParallelOptions& options, const DataParallelComms& comms,
    const float* initial) {
  if (comms.world == nullptr) return absl::InvalidArgumentError("DataParallel: no communicator");
  const bool hybrid = options.sharding == Sharding::kHybridShard;
  if (hybrid && (comms.intra == nullptr || comms.inter == nullptr)) {
    return absl::InvalidArgumentError(
        "hybrid_shard needs intra-node and inter-node communicators (torchrun's "
        "LOCAL_WORLD_SIZE must be the same on every node)");
  }
  if (options.powersgd && options.sharding != Sharding::kNoShard && !hybrid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compression: powersgd works on replicated gradients: use sharding no_shard or "
        "hybrid_shard (got ",
        std::string(ShardingName(options.sharding)), "); int8/fp16/bf16 work with every sharding"));
  }
  std::unique_ptr<DataParallel> dp(new DataParallel(layout, options, comms));
  dp->group_ = hybrid ? comms.intra : comms.world;
  dp->group_rank_ = dp->group_->rank();
  dp->group_size_ = dp->group_->size();

  const UnitShards partition = UnitShards::Make(layout, dp->group_rank_, dp->group_size_);
  dp->units_ = partition.units;
  dp->local_total_ = partition.local_total;
  if (options.sharding == Sharding::kNoShard) {
    RM_ASSIGN_OR_RETURN(dp->buckets_, GradBuckets::Make(dp->units_, options.bucket_cap_bytes));
  } else if (options.bucket_cap_bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("distributed.bucket_cap_mb applies to sharding no_shard only (got ",
                     std::string(ShardingName(options.sharding)), ")"));
  }
  const size_t g = static_cast<size_t>(dp->group_size_);
  const size_t U = dp->units_.size();
  dp->gathered_.resize(U);
  dp->gather_work_.resize(U);
  dp->unit_grads_.resize(U);
  dp->reduce_work_.resize(U);
  if (options.codec == WireCodec::kInt8 && options.sharding != Sharding::kNoShard) {
    dp->residual_rs_.resize(U);
    for (size_t u = 0; u < U; ++u) dp->residual_rs_[u].assign(dp->units_[u].shard * g, 0.0f);
  }
  if (options.codec == WireCodec::kInt8) dp->residual_ag_.resize(U + 1);
  dp->skip_probe_.resize(U + 1 + kPowerSgdCalls);

  if (options.sharding == Sharding::kNoShard) {
    dp->full_params_.assign(initial, initial + layout.total);
    dp->full_grads_.assign(layout.total, 0.0f);
    dp->opt_ = std::make_unique<AdamW>(layout, options.adam);
  } else {
    if (dp->full_params()) dp->full_params_.assign(initial, initial + layout.total);
    if (options.sharding == Sharding::kShardGradOp) dp->full_grads_.assign(layout.total, 0.0f);
    dp->shard_params_.assign(dp->local_total_, 0.0f);
    dp->shard_grads_.assign(dp->local_total_, 0.0f);
    std::vector<AdamWRange> ranges;
    for (const Unit& u : dp->units_) {
      const size_t ob = u.owned_begin, oe = ob + u.valid;
      std::copy(initial + ob, initial + oe, dp->shard_params_.begin() + u.local);
      for (const ParamSpec& s : layout.specs) {
        const size_t b = std::max(ob, s.offset), e = std::min(oe, s.offset + s.numel);
        if (b < e) ranges.push_back({u.local + (b - ob), u.local + (e - ob), s.weight_decay});
      }
    }
    dp->opt_ = std::make_unique<AdamW>(std::move(ranges), dp->local_total_, options.adam);
  }

  if (options.powersgd) {
    PowerSgdOptions po;
    po.rank = options.powersgd_rank;
    po.seed = options.seed;
    const UnitShards parts{dp->units_, dp->local_total_, dp->group_rank_, dp->group_size_};
    dp->powersgd_ =
        std::make_unique<PowerSgd>(PowerSgdMatricesFor(layout, hybrid ? &parts : nullptr),
                                   hybrid ? dp->local_total_ : layout.total, po);
  }
  return dp;
}

bool DataParallel::PowerSgdNow() const {
  return powersgd_ != nullptr && opt_->step() >= options_.powersgd_start_step;
}

void DataParallel::Fail(const absl::Status& s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = s;
}

absl::Status DataParallel::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void DataParallel::Track(ptrdiff_t delta) {
  const int64_t now = transient_bytes_.fetch_add(delta) + delta;
  int64_t peak = peak_transient_bytes_.load();
  while (now > peak && !peak_transient_bytes_.compare_exchange_weak(peak, now)) {
  }
}

void DataParallel::BeginStep() {
  std::fill(full_grads_.begin(), full_grads_.end(), 0.0f);
  std::fill(shard_grads_.begin(), shard_grads_.end(), 0.0f);
}

void DataParallel::BeginMicroBatch(bool last_of_step, bool training) {
  last_micro_ = last_of_step;
  training_ = training;
  backward_ = false;
}

void DataParallel::IssueGather(int unit) {
  if (gather_work_[unit] != nullptr || !gathered_[unit].empty()) return;
  const Unit& u = units_[unit];
  gathered_[unit].resize(u.shard * static_cast<size_t>(group_size_));
  Track(static_cast<ptrdiff_t>(gathered_[unit].size() * sizeof(float)));
  counters_.gather_bytes += u.shard * sizeof(float) * static_cast<size_t>(group_size_ - 1);
  float* out = gathered_[unit].data();
  const float* in = shard_params_.data() + u.local;
  gather_work_[unit] =
      queue_.Submit([this, in, out, n = u.shard] { return group_->AllGather(in, out, n); });
}

void DataParallel::WaitGather(int unit) {
  if (gather_work_[unit] == nullptr) return;
  absl::Status s = gather_work_[unit]->Wait();
  gather_work_[unit] = nullptr;
  if (!s.ok()) Fail(s);
}

const float* DataParallel::AcquireParams(int unit) {
  if (full_params()) return full_params_.data() + units_[unit].begin;
  IssueGather(unit);
  WaitGather(unit);
  // Prefetch the unit that comes next in this pass.
  const int next = backward_ ? unit - 1 : unit + 1;
  if (next >= 0 && next < static_cast<int>(units_.size())) IssueGather(next);
  return gathered_[unit].data();
}

void DataParallel::ReleaseParams(int unit) {
  if (full_params()) return;
  // The head is used again at once by backward: keep it (as FSDP keeps its root unit).
  if (training_ && !backward_ && unit + 1 == static_cast<int>(units_.size())) return;
  WaitGather(unit);  // a prefetch of this unit may still be in flight
  Track(-static_cast<ptrdiff_t>(gathered_[unit].size() * sizeof(float)));
  std::vector<float>().swap(gathered_[unit]);
}

float* DataParallel::AcquireGrads(int unit) {
  const Unit& u = units_[unit];
  if (!sharded_params()) return full_grads_.data() + u.begin;
  if (reduce_work_[unit] != nullptr) {  // the previous micro-batch's reduction of this unit
    absl::Status s = reduce_work_[unit]->Wait();
    reduce_work_[unit] = nullptr;
    if (!s.ok()) Fail(s);
  }
  unit_grads_[unit].assign(u.shard * static_cast<size_t>(group_size_), 0.0f);
  Track(static_cast<ptrdiff_t>(unit_grads_[unit].size() * sizeof(float)));
  return unit_grads_[unit].data();
}

void DataParallel::GradsDone(int unit) {
  switch (options_.sharding) {
    case Sharding::kNoShard: {
      if (!last_micro_ || PowerSgdNow()) return;  // PowerSGD runs in FinishStep
      // The bucket this unit completes (backward has done every higher unit already), keyed by
      // its launching unit: residuals and skip probes follow the bucket's range.
      const GradBucket* b = buckets_.LaunchedBy(unit);
      if (b == nullptr) return;
      float* data = full_grads_.data() + b->begin;
      reduce_work_[unit] = queue_.Submit([this, data, n = b->numel, unit] {
        return CompressedAllReduce(comms_.world, data, n, unit);
      });
      return;
    }
    case Sharding::kShardGradOp: {
      if (!last_micro_) return;
      reduce_work_[unit] = queue_.Submit([this, unit] {
        const Unit& uu = units_[unit];
        const size_t padded = uu.shard * static_cast<size_t>(group_size_);
        if (padded_scratch_.size() < padded) {
          Track(static_cast<ptrdiff_t>((padded - padded_scratch_.size()) * sizeof(float)));
          padded_scratch_.resize(padded);
        }
        std::copy_n(full_grads_.data() + uu.begin, uu.numel, padded_scratch_.data());
        std::fill(padded_scratch_.begin() + uu.numel, padded_scratch_.begin() + padded, 0.0f);
        return ReduceScatterUnit(unit, padded_scratch_.data());
      });
      return;
    }
    case Sharding::kFullShard:
    case Sharding::kHybridShard: {
      std::vector<float>* buf = &unit_grads_[unit];
      reduce_work_[unit] = queue_.Submit([this, unit, buf] {
        absl::Status s = ReduceScatterUnit(unit, buf->data());
        Track(-static_cast<ptrdiff_t>(buf->size() * sizeof(float)));
        std::vector<float>().swap(*buf);
        return s;
      });
      return;
    }
  }
}

absl::Status DataParallel::ReduceScatterUnit(int unit, const float* padded) {
  const Unit& u = units_[unit];
  const size_t g = static_cast<size_t>(group_size_);
  float* mine = shard_grads_.data() + u.local;
  counters_.reduce_raw_bytes += u.shard * sizeof(float) * (g - 1);
  if (options_.codec == WireCodec::kNone || g == 1) {
    counters_.reduce_wire_bytes += u.shard * sizeof(float) * (g - 1);
    std::vector<float> out(u.shard);
    RM_RETURN_IF_ERROR(group_->ReduceScatterSum(padded, out.data(), u.shard));
    for (size_t i = 0; i < u.shard; ++i) mine[i] += out[i];
    return absl::OkStatus();
  }
  const size_t bytes = EncodedBytes(options_.codec, u.shard);
  counters_.reduce_wire_bytes += bytes * (g - 1);
  std::vector<uint8_t> send(bytes * g), recv(bytes * g);
  float* residual = options_.codec == WireCodec::kInt8 ? residual_rs_[unit].data() : nullptr;
  for (size_t r = 0; r < g; ++r) {
    Encode(options_.codec, padded + r * u.shard, u.shard,
           residual != nullptr ? residual + r * u.shard : nullptr, send.data() + r * bytes);
  }
  RM_RETURN_IF_ERROR(group_->AllToAll(send.data(), recv.data(), bytes));
  for (size_t r = 0; r < g; ++r) DecodeAdd(options_.codec, recv.data() + r * bytes, u.shard, mine);
  return absl::OkStatus();
}

absl::Status DataParallel::CompressedAllReduce(Communicator* comm, float* data, size_t n, int key) {
  const size_t g = static_cast<size_t>(comm->size());
  counters_.reduce_raw_bytes += 2 * n * sizeof(float) * (g - 1) / g;
  return ReplicatedAllReduce(comm, options_.codec, data, n, key);
}

absl::Status DataParallel::ReplicatedAllReduce(Communicator* comm, WireCodec codec, float* data,
                                               size_t n, int key) {
  const size_t g = static_cast<size_t>(comm->size());
  // Zero-block skipping costs a small all-gather; a key whose blocks were (nearly) all in use at
  // its last probe skips the probe, and probes again after kReprobeCalls calls. The state is
  // the same on every rank (it comes from the shared masks), so all ranks decide alike.
  SkipProbe& probe = skip_probe_[static_cast<size_t>(key + 1)];
  const bool skip =
      g > 1 && options_.skip_zero_blocks && (probe.sparse || probe.dense_calls >= kReprobeCalls);
  if (g == 1 || (codec == WireCodec::kNone && !skip)) {
    // Uncompressed and dense: the backend's own all-reduce (a ring in Gloo, NCCL's).
    ++probe.dense_calls;
    counters_.reduce_wire_bytes += 2 * n * sizeof(float) * (g - 1) / g;
    return comm->AllReduceSum(data, n);
  }
  // Residual keys: units use residual_rs_ for reduce-scatter (sized to the unit's padded
  // shard·g), so all-reduce residuals live in residual_ag_.
  float* residual = nullptr;
  if (codec == WireCodec::kInt8) {
    std::vector<float>& r = residual_ag_[static_cast<size_t>(key + 1)];
    if (r.size() != TwoStageResidualFloats(n)) r.assign(TwoStageResidualFloats(n), 0.0f);
    residual = r.data();
  }
  TwoStageStats stats;
  // allreduce_scratch_ is used only here, on the communication thread.
  RM_RETURN_IF_ERROR(TwoStageAllReduce(
      codec, static_cast<int>(g), comm->rank(), data, n, residual, skip, allreduce_scratch_,
      [comm](const void* in, void* out, size_t b) { return comm->AllToAll(in, out, b); },
      [comm](const void* in, void* out, size_t b) { return comm->AllGatherBytes(in, out, b); },
      &stats));
  counters_.reduce_wire_bytes += stats.wire_bytes;
  if (skip) {
    probe.sparse = stats.active_chunks * 4 < stats.chunks * 3;  // under 75% in use
    probe.dense_calls = 0;
  } else {
    ++probe.dense_calls;
  }
  return absl::OkStatus();
}

absl::Status DataParallel::PowerSgdAllReduce(Communicator* comm, float* grads) {
  // PowerSGD's all-reduces (exact part, P, Q', in that order) are uncompressed and skip zero
  // blocks: P has a zero row for every zero row of a matrix, such as an embedding table's
  // untouched rows. Each call position has its own skip key.
  int call = 0;
  const int first_key = static_cast<int>(units_.size());
  return powersgd_->AllReduce(grads, comm->size(), [&](float* d, size_t n) {
    return ReplicatedAllReduce(comm, WireCodec::kNone, d, n, first_key + call++);
  });
}

void DataParallel::RunEmptyMicroBatch(int num_units) {
  backward_ = false;
  RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/true, [this] { backward_ = true; });
}

void DataParallel::RunEmptyForward(int num_units) {
  backward_ = false;
  RunUnitsWithoutCompute(*this, num_units, /*with_backward=*/false, [] {});
}

absl::StatusOr<DataParallel::StepResult> DataParallel::FinishStep(double local_loss, double lr,
                                                                  double max_grad_norm,
                                                                  float flag) {
  for (auto& w : reduce_work_) w = nullptr;
  RM_RETURN_IF_ERROR(queue_.Drain());
  RM_RETURN_IF_ERROR(status());
  const bool hybrid = options_.sharding == Sharding::kHybridShard;
  // Replicated reductions that are not overlapped with backward.
  // A ring all-reduce of k floats sends 2(g-1)/g·k of them from each rank.
  auto allreduce_bytes = [](size_t floats, int g) {
    return 2 * floats * sizeof(float) * static_cast<size_t>(g - 1) / static_cast<size_t>(g);
  };
  if (options_.sharding == Sharding::kNoShard && PowerSgdNow()) {
    RM_RETURN_IF_ERROR(queue_.Run([&] {
      const int g = comms_.world->size();
      counters_.reduce_raw_bytes += allreduce_bytes(full_grads_.size(), g);
      return PowerSgdAllReduce(comms_.world, full_grads_.data());
    }));
  }
  if (hybrid) {
    RM_RETURN_IF_ERROR(queue_.Run([&]() -> absl::Status {
      if (PowerSgdNow()) {
        const int g = comms_.inter->size();
        counters_.reduce_raw_bytes += allreduce_bytes(shard_grads_.size(), g);
        return PowerSgdAllReduce(comms_.inter, shard_grads_.data());
      }
      return CompressedAllReduce(comms_.inter, shard_grads_.data(), shard_grads_.size(),
                                 kKeyHybridInter);
    }));
  }
  // Global loss and squared gradient norm in one small all-reduce. Each element of the
  // gradient is counted once: rank 0 for replicated gradients, shard owners otherwise (only on
  // node 0 under hybrid_shard, where every node holds the same shards).
  double sq = 0;
  const bool counts = options_.sharding == Sharding::kNoShard ? comms_.world->rank() == 0
                      : hybrid                                ? comms_.inter->rank() == 0
                                                              : true;
  if (counts) {
    const std::vector<float>& gr =
        options_.sharding == Sharding::kNoShard ? full_grads_ : shard_grads_;
    const float* x = gr.data();
    const size_t count = gr.size();
    // Vectorised, not threaded: the summation order depends only on the size, never on the
    // thread count, so a run is reproducible whatever OMP_NUM_THREADS is.
#pragma omp simd reduction(+ : sq)
    for (size_t i = 0; i < count; ++i) sq += static_cast<double>(x[i]) * x[i];
  }
  std::vector<float> sums = {static_cast<float>(local_loss), static_cast<float>(sq), flag};
  RM_RETURN_IF_ERROR(AllReduceWorld(&sums));
  StepResult result{sums[0], std::sqrt(static_cast<double>(sums[1])), sums[2]};
  float* grads = options_.sharding == Sharding::kNoShard ? full_grads_.data() : shard_grads_.data();
  const size_t n =
      options_.sharding == Sharding::kNoShard ? full_grads_.size() : shard_grads_.size();
  if (max_grad_norm > 0) {
    const double coef = max_grad_norm / (result.grad_norm + 1e-6);
    if (coef < 1.0) {
      const float c = static_cast<float>(coef);
      for (size_t i = 0; i < n; ++i) grads[i] *= c;
    }
  }
  if (options_.sharding == Sharding::kNoShard) {
    opt_->Step(full_params_.data(), full_grads_.data(), lr);
    return result;
  }
  opt_->Step(shard_params_.data(), shard_grads_.data(), lr);
  if (options_.sharding == Sharding::kShardGradOp) {
    // Publish the updated shards into every rank's full parameters.
    RM_RETURN_IF_ERROR(queue_.Run([&]() -> absl::Status {
      std::vector<float> all;
      for (const Unit& u : units_) {
        all.resize(u.shard * static_cast<size_t>(group_size_));
        counters_.gather_bytes += u.shard * sizeof(float) * static_cast<size_t>(group_size_ - 1);
        RM_RETURN_IF_ERROR(group_->AllGather(shard_params_.data() + u.local, all.data(), u.shard));
        std::copy_n(all.data(), u.numel, full_params_.data() + u.begin);
      }
      return absl::OkStatus();
    }));
  }
  return result;
}

absl::Status DataParallel::AllReduceWorld(std::vector<float>* values) {
  return queue_.Run([&] { return comms_.world->AllReduceSum(values->data(), values->size()); });
}

absl::Status DataParallel::Barrier() {
  return queue_.Run([&] { return comms_.world->Barrier(); });
}

absl::Status DataParallel::GatherFullParams(std::vector<float>* out) {
  if (full_params()) {
    *out = full_params_;
    return absl::OkStatus();
  }
  return GatherShards(out);
}

absl::Status DataParallel::GatherShards(std::vector<float>* out) {
  out->assign(layout_.total, 0.0f);
  return queue_.Run([&]() -> absl::Status {
    std::vector<float> all;
    for (const Unit& u : units_) {
      all.resize(u.shard * static_cast<size_t>(group_size_));
      RM_RETURN_IF_ERROR(group_->AllGather(shard_params_.data() + u.local, all.data(), u.shard));
      std::copy_n(all.data(), u.numel, out->data() + u.begin);
    }
    return absl::OkStatus();
  });
}

ShardRanges DataParallel::SaveRanges() const {
  if (options_.sharding == Sharding::kNoShard) {
    // Every rank holds everything: each writes an equal slice, so writes run in parallel.
    return EqualSlice(layout_.total, comms_.world->rank(), comms_.world->size());
  }
  // Under hybrid_shard node 0 writes; the other nodes hold the same shards.
  if (options_.sharding == Sharding::kHybridShard && comms_.inter->rank() != 0) return {};
  return UnitShards{units_, local_total_, group_rank_, group_size_}.Owned();
}

ShardRanges DataParallel::LoadRanges() const {
  if (options_.sharding == Sharding::kNoShard) {
    ShardRanges r;
    r.ranges.push_back({0, layout_.total});
    return r;
  }
  return UnitShards{units_, local_total_, group_rank_, group_size_}.Owned();
}

void DataParallel::CopyForSave(std::vector<float>* params, std::vector<float>* exp_avg,
                               std::vector<float>* exp_avg_sq) const {
  params->clear();
  exp_avg->clear();
  exp_avg_sq->clear();
  const ShardRanges r = SaveRanges();
  if (options_.sharding == Sharding::kNoShard) {
    for (const auto& [b, e] : r.ranges) {
      params->insert(params->end(), full_params_.begin() + b, full_params_.begin() + e);
      exp_avg->insert(exp_avg->end(), opt_->exp_avg().begin() + b, opt_->exp_avg().begin() + e);
      exp_avg_sq->insert(exp_avg_sq->end(), opt_->exp_avg_sq().begin() + b,
                         opt_->exp_avg_sq().begin() + e);
    }
    return;
  }
  if (r.ranges.empty()) return;
  for (const Unit& u : units_) {
    if (u.valid == 0) continue;
    auto span = [&](const std::vector<float>& v, std::vector<float>* out) {
      out->insert(out->end(), v.begin() + u.local, v.begin() + u.local + u.valid);
    };
    span(shard_params_, params);
    span(opt_->exp_avg(), exp_avg);
    span(opt_->exp_avg_sq(), exp_avg_sq);
  }
}

absl::Status DataParallel::LoadFrom(const LoadedShard& shard, int64_t optimizer_step) {
  const ShardRanges want = LoadRanges();
  if (shard.params.size() != want.local_numel()) {
    return absl::InternalError("checkpoint shard does not match this rank's ranges");
  }
  opt_->set_step(optimizer_step);
  if (options_.sharding == Sharding::kNoShard) {
    full_params_ = shard.params;
    opt_->exp_avg() = shard.exp_avg;
    opt_->exp_avg_sq() = shard.exp_avg_sq;
    return absl::OkStatus();
  }
  size_t pos = 0;
  for (const Unit& u : units_) {
    if (u.valid == 0) continue;
    std::copy_n(shard.params.begin() + pos, u.valid, shard_params_.begin() + u.local);
    std::copy_n(shard.exp_avg.begin() + pos, u.valid, opt_->exp_avg().begin() + u.local);
    std::copy_n(shard.exp_avg_sq.begin() + pos, u.valid, opt_->exp_avg_sq().begin() + u.local);
    pos += u.valid;
  }
  // shard_grad_op: rebuild the full parameters from the loaded shards (collective).
  if (options_.sharding == Sharding::kShardGradOp) RM_RETURN_IF_ERROR(GatherShards(&full_params_));
  return absl::OkStatus();
}

MemoryStats DataParallel::memory() const {
  MemoryStats m;
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  m.persistent_bytes = bytes(full_params_) + bytes(full_grads_) + bytes(shard_params_) +
                       bytes(shard_grads_) + bytes(opt_->exp_avg()) + bytes(opt_->exp_avg_sq());
  for (const auto& r : residual_rs_) m.persistent_bytes += bytes(r);
  for (const auto& r : residual_ag_) m.persistent_bytes += bytes(r);
  if (powersgd_ != nullptr) m.persistent_bytes += powersgd_->held_bytes();
  m.persistent_bytes += allreduce_scratch_.bytes();  // read after the step's queue has drained
  m.peak_transient_bytes = static_cast<size_t>(peak_transient_bytes_.load());
  return m;
}

}  // namespace ringmaster::trainer
