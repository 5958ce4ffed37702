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

DataParallel::DataParallel(const ParamLayout& layout, const DataParallelOptions& options,
                           ShardingPlan plan)
    : layout_(layout),
      options_(options),
      plan_(std::move(plan)),
      skip_(options.skip_zero_blocks, AllReduceKeys::Count(plan_.num_units())) {}

DataParallel::~DataParallel() { queue_.Drain().IgnoreError(); }

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(
    const ParamLayout& layout, const DataParallelOptions& options, const DataParallelComms& comms,
    const float* initial) {
  if (comms.world == nullptr) return absl::InvalidArgumentError("DataParallel: no communicator");
  RM_ASSIGN_OR_RETURN(ShardingPlan plan,
                      ShardingPlan::Make(layout, options.sharding, comms, options.powersgd,
                                         options.bucket_cap_bytes));
  std::unique_ptr<DataParallel> dp(new DataParallel(layout, options, std::move(plan)));
  const ShardingTraits& t = dp->traits();
  const size_t g = static_cast<size_t>(dp->group_size());
  const size_t U = dp->units().size();
  const size_t local_total = dp->plan_.parts().local_total;
  dp->gathered_.resize(U);
  dp->gather_work_.resize(U);
  dp->unit_grads_.resize(U);
  dp->reduce_work_.resize(U);
  if (options.codec == WireCodec::kInt8 && t.shard_grads) {
    dp->residual_rs_.resize(U);
    for (size_t u = 0; u < U; ++u) dp->residual_rs_[u].assign(dp->units()[u].shard * g, 0.0f);
  }
  if (options.codec == WireCodec::kInt8) {
    dp->residual_ag_.resize(static_cast<size_t>(AllReduceKeys::Count(static_cast<int>(U))));
  }
  if (t.full_grads()) dp->full_grads_.assign(layout.total, 0.0f);
  if (!t.shard_params) dp->full_params_.assign(initial, initial + layout.total);
  if (t.shard_grads) {
    dp->shard_params_.assign(local_total, 0.0f);
    dp->shard_grads_.assign(local_total, 0.0f);
    dp->plan_.CopyShards(initial, dp->shard_params_.data());
  }
  dp->opt_ =
      std::make_unique<AdamW>(dp->plan_.DecayRanges(layout), dp->plan_.update_size(), options.adam);
  if (options.powersgd) {
    PowerSgdOptions po;
    po.rank = options.powersgd_rank;
    po.seed = options.seed;
    dp->powersgd_ =
        std::make_unique<PowerSgd>(dp->plan_.PowerSgdMatrices(layout), dp->plan_.update_size(), po);
  }
  return dp;
}

bool DataParallel::PowerSgdNow() const {
  return powersgd_ != nullptr && opt_->step() >= options_.powersgd_start_step;
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

void DataParallel::IssueGather(int unit) {
  if (gather_work_[unit] != nullptr || !gathered_[unit].empty()) return;
  const Unit& u = units()[unit];
  gathered_[unit].resize(plan_.parts().padded(unit));
  Track(static_cast<ptrdiff_t>(gathered_[unit].size() * sizeof(float)));
  counters_.gather_bytes += u.shard * sizeof(float) * static_cast<size_t>(group_size() - 1);
  float* out = gathered_[unit].data();
  const float* in = shard_params_.data() + u.local;
  gather_work_[unit] =
      queue_.Submit([this, in, out, n = u.shard] { return group()->AllGather(in, out, n); });
}

void DataParallel::WaitGather(int unit) {
  if (gather_work_[unit] == nullptr) return;
  absl::Status s = gather_work_[unit]->Wait();
  gather_work_[unit] = nullptr;
  if (!s.ok()) Fail(s);
}

const float* DataParallel::AcquireParams(int unit) {
  if (!traits().shard_params) return full_params_.data() + units()[unit].begin;
  IssueGather(unit);
  WaitGather(unit);
  // Prefetch the unit that comes next in this pass.
  const int next = backward_ ? unit - 1 : unit + 1;
  if (next >= 0 && next < plan_.num_units()) IssueGather(next);
  return gathered_[unit].data();
}

void DataParallel::ReleaseParams(int unit) {
  if (!traits().shard_params) return;
  // The head is used again at once by backward: keep it (as FSDP keeps its root unit).
  if (training_ && !backward_ && unit + 1 == plan_.num_units()) return;
  WaitGather(unit);  // a prefetch of this unit may still be in flight
  Track(-static_cast<ptrdiff_t>(gathered_[unit].size() * sizeof(float)));
  std::vector<float>().swap(gathered_[unit]);
}

float* DataParallel::AcquireGrads(int unit) {
  const Unit& u = units()[unit];
  if (traits().full_grads()) return full_grads_.data() + u.begin;
  if (reduce_work_[unit] != nullptr) {  // the previous micro-batch's reduction of this unit
    absl::Status s = reduce_work_[unit]->Wait();
    reduce_work_[unit] = nullptr;
    if (!s.ok()) Fail(s);
  }
  unit_grads_[unit].assign(plan_.parts().padded(unit), 0.0f);
  Track(static_cast<ptrdiff_t>(unit_grads_[unit].size() * sizeof(float)));
  return unit_grads_[unit].data();
}

void DataParallel::GradsDone(int unit) {
  if (!plan_.ReducesIn(last_micro_)) return;
  if (!traits().shard_grads) {
    if (PowerSgdNow()) return;  // PowerSGD runs in FinishStep
    // The bucket this unit completes (backward has done every higher unit already), keyed by
    // its launching unit: residuals and skip probes follow the bucket's range.
    const GradBucket* b = plan_.buckets().LaunchedBy(unit);
    if (b == nullptr) return;
    float* data = full_grads_.data() + b->begin;
    reduce_work_[unit] = queue_.Submit([this, data, n = b->numel, unit] {
      return CompressedAllReduce(plan_.comms().world, data, n, AllReduceKeys::Bucket(unit));
    });
    return;
  }
  if (traits().full_grads()) {  // the unit's part of the full gradients, padded
    reduce_work_[unit] = queue_.Submit([this, unit] {
      const Unit& uu = units()[unit];
      const size_t padded = plan_.parts().padded(unit);
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
  std::vector<float>* buf = &unit_grads_[unit];
  reduce_work_[unit] = queue_.Submit([this, unit, buf] {
    absl::Status s = ReduceScatterUnit(unit, buf->data());
    Track(-static_cast<ptrdiff_t>(buf->size() * sizeof(float)));
    std::vector<float>().swap(*buf);
    return s;
  });
}

absl::Status DataParallel::ReduceScatterUnit(int unit, const float* padded) {
  const Unit& u = units()[unit];
  const size_t g = static_cast<size_t>(group_size());
  float* mine = shard_grads_.data() + u.local;
  counters_.reduce_raw_bytes += u.shard * sizeof(float) * (g - 1);
  if (options_.codec == WireCodec::kNone || g == 1) {
    counters_.reduce_wire_bytes += u.shard * sizeof(float) * (g - 1);
    std::vector<float> out(u.shard);
    RM_RETURN_IF_ERROR(group()->ReduceScatterSum(padded, out.data(), u.shard));
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
  RM_RETURN_IF_ERROR(group()->AllToAll(send.data(), recv.data(), bytes));
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
  const int g = comm->size();
  const bool skip = skip_.Skip(key, g);
  if (ZeroBlockSkip::Plain(codec, skip, g)) {
    // Uncompressed and dense: the backend's own all-reduce (a ring in Gloo, NCCL's).
    skip_.Record(key, false, {});
    counters_.reduce_wire_bytes += 2 * n * sizeof(float) * static_cast<size_t>(g - 1) / g;
    return comm->AllReduceSum(data, n);
  }
  // Residual keys: units use residual_rs_ for reduce-scatter (sized to the unit's padded
  // shard·g), so all-reduce residuals live in residual_ag_.
  float* residual = nullptr;
  if (codec == WireCodec::kInt8) {
    std::vector<float>& r = residual_ag_[static_cast<size_t>(key)];
    if (r.size() != TwoStageResidualFloats(n)) r.assign(TwoStageResidualFloats(n), 0.0f);
    residual = r.data();
  }
  TwoStageStats stats;
  // allreduce_scratch_ is used only here, on the communication thread.
  RM_RETURN_IF_ERROR(TwoStageAllReduce(
      codec, g, comm->rank(), data, n, residual, skip, allreduce_scratch_,
      [comm](const void* in, void* out, size_t b) { return comm->AllToAll(in, out, b); },
      [comm](const void* in, void* out, size_t b) { return comm->AllGatherBytes(in, out, b); },
      &stats));
  counters_.reduce_wire_bytes += stats.wire_bytes;
  skip_.Record(key, skip, stats);
  return absl::OkStatus();
}

absl::Status DataParallel::PowerSgdAllReduce(Communicator* comm, float* grads) {
  // PowerSGD's all-reduces (exact part, P, Q', in that order) are uncompressed and skip zero
  // blocks: P has a zero row for every zero row of a matrix, such as an embedding table's
  // untouched rows. Each call position has its own skip key.
  int call = 0;
  return powersgd_->AllReduce(grads, comm->size(), [&](float* d, size_t n) {
    return ReplicatedAllReduce(comm, WireCodec::kNone, d, n,
                               AllReduceKeys::PowerSgd(plan_.num_units(), call++));
  });
}

absl::StatusOr<DataParallel::StepResult> DataParallel::FinishStep(double local_loss, double lr,
                                                                  double max_grad_norm,
                                                                  float flag) {
  for (auto& w : reduce_work_) w = nullptr;
  RM_RETURN_IF_ERROR(queue_.Drain());
  RM_RETURN_IF_ERROR(status());
  const ShardingTraits& t = traits();
  std::vector<float>& grads = update_grads();
  // Replicated reductions that are not overlapped with backward: PowerSGD's (over the world
  // or across nodes), hybrid_shard's across nodes.
  if (PowerSgdNow()) {
    RM_RETURN_IF_ERROR(queue_.Run([&] {
      Communicator* comm = plan_.replica_comm();
      // A ring all-reduce of k floats sends 2(g-1)/g·k of them from each rank.
      const size_t g = static_cast<size_t>(comm->size());
      counters_.reduce_raw_bytes += 2 * grads.size() * sizeof(float) * (g - 1) / g;
      return PowerSgdAllReduce(comm, grads.data());
    }));
  } else if (t.replicate_across_nodes) {
    RM_RETURN_IF_ERROR(queue_.Run([&] {
      return CompressedAllReduce(plan_.comms().inter, grads.data(), grads.size(),
                                 AllReduceKeys::CrossNode(plan_.num_units()));
    }));
  }
  // Global loss and squared gradient norm in one small all-reduce, each element counted once.
  double sq = 0;
  if (plan_.CountsInNorm()) {
    const float* x = grads.data();
    const size_t count = grads.size();
    // Vectorised, not threaded: the summation order depends only on the size, never on the
    // thread count, so a run is reproducible whatever OMP_NUM_THREADS is.
#pragma omp simd reduction(+ : sq)
    for (size_t i = 0; i < count; ++i) sq += static_cast<double>(x[i]) * x[i];
  }
  std::vector<float> sums = {static_cast<float>(local_loss), static_cast<float>(sq), flag};
  RM_RETURN_IF_ERROR(AllReduceWorld(&sums));
  StepResult result{sums[0], std::sqrt(static_cast<double>(sums[1])), sums[2]};
  if (max_grad_norm > 0) {
    const double coef = max_grad_norm / (result.grad_norm + 1e-6);
    if (coef < 1.0) {
      const float c = static_cast<float>(coef);
      for (float& x : grads) x *= c;
    }
  }
  opt_->Step(t.shard_grads ? shard_params_.data() : full_params_.data(), grads.data(), lr);
  // shard_grad_op: publish the updated shards into every rank's full parameters.
  if (t.publish_shards()) RM_RETURN_IF_ERROR(GatherShards(&full_params_, /*count=*/true));
  return result;
}

absl::Status DataParallel::AllReduceWorld(std::vector<float>* values) {
  return queue_.Run(
      [&] { return plan_.comms().world->AllReduceSum(values->data(), values->size()); });
}

absl::Status DataParallel::Barrier() {
  return queue_.Run([&] { return plan_.comms().world->Barrier(); });
}

absl::Status DataParallel::GatherFullParams(std::vector<float>* out) {
  if (!traits().shard_params) {
    *out = full_params_;
    return absl::OkStatus();
  }
  return GatherShards(out);
}

absl::Status DataParallel::GatherShards(std::vector<float>* out, bool count) {
  out->assign(layout_.total, 0.0f);
  return queue_.Run([&]() -> absl::Status {
    std::vector<float> all;
    for (int unit = 0; unit < plan_.num_units(); ++unit) {
      const Unit& u = units()[unit];
      all.resize(plan_.parts().padded(unit));
      if (count) {
        counters_.gather_bytes += u.shard * sizeof(float) * static_cast<size_t>(group_size() - 1);
      }
      RM_RETURN_IF_ERROR(group()->AllGather(shard_params_.data() + u.local, all.data(), u.shard));
      std::copy_n(all.data(), u.numel, out->data() + u.begin);
    }
    return absl::OkStatus();
  });
}

ShardRanges DataParallel::SaveRanges() const { return plan_.SaveRanges(); }

ShardRanges DataParallel::LoadRanges() const { return plan_.LoadRanges(); }

void DataParallel::CopyForSave(std::vector<float>* params, std::vector<float>* exp_avg,
                               std::vector<float>* exp_avg_sq) const {
  params->clear();
  exp_avg->clear();
  exp_avg_sq->clear();
  const std::vector<float>& p = traits().shard_grads ? shard_params_ : full_params_;
  for (const auto& [b, n] : plan_.LocalSpans(SaveRanges())) {
    params->insert(params->end(), p.begin() + b, p.begin() + b + n);
    exp_avg->insert(exp_avg->end(), opt_->exp_avg().begin() + b, opt_->exp_avg().begin() + b + n);
    exp_avg_sq->insert(exp_avg_sq->end(), opt_->exp_avg_sq().begin() + b,
                       opt_->exp_avg_sq().begin() + b + n);
  }
}

absl::Status DataParallel::LoadFrom(const LoadedShard& shard, int64_t optimizer_step) {
  const ShardRanges want = LoadRanges();
  if (shard.params.size() != want.local_numel()) {
    return absl::InternalError("checkpoint shard does not match this rank's ranges");
  }
  opt_->set_step(optimizer_step);
  std::vector<float>& p = traits().shard_grads ? shard_params_ : full_params_;
  size_t pos = 0;
  for (const auto& [b, n] : plan_.LocalSpans(want)) {
    std::copy_n(shard.params.begin() + pos, n, p.begin() + b);
    std::copy_n(shard.exp_avg.begin() + pos, n, opt_->exp_avg().begin() + b);
    std::copy_n(shard.exp_avg_sq.begin() + pos, n, opt_->exp_avg_sq().begin() + b);
    pos += n;
  }
  // shard_grad_op: rebuild the full parameters from the loaded shards (collective).
  if (traits().publish_shards()) RM_RETURN_IF_ERROR(GatherShards(&full_params_));
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
