#include "trainer/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "trainer/data/tsv.h"
#include "trainer/io/hf_model_dir.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/train/sharded_checkpoint.h"

namespace ringmaster::trainer {
namespace fs = std::filesystem;

namespace {

BertInputs InputsOf(const Batch& b) {
  return {b.batch_size,
          b.seq_len,
          b.input_ids.data(),
          b.token_type_ids.data(),
          b.attention_mask.data(),
          b.labels.data()};
}

// Dropout masks derive from (seed, step, micro-batch): a resumed run draws the same masks.
uint64_t DropoutSeed(uint64_t seed, int64_t step, int micro) {
  return cpu::Mix64(cpu::Mix64(seed ^ 0x5bd1e995ULL) ^ cpu::Mix64(static_cast<uint64_t>(step)) ^
                    static_cast<uint64_t>(micro));
}

absl::StatusOr<std::vector<EncodedExample>> LoadEncoded(const std::string& path, int num_labels,
                                                        const WordPieceTokenizer& tok,
                                                        int max_len) {
  RM_ASSIGN_OR_RETURN(std::vector<Example> rows, ReadTsv(path, num_labels));
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows"));
  return EncodeAll(rows, [&](std::string_view s) { return tok.Encode(s, max_len); });
}

// `compression: auto` on CPU ranks spread over several nodes (no tensor cores to spare, so the
// link decides; ranks of one node talk over loopback and never compress): rank 0 times a 4 MiB
// all-reduce and picks int8 (valid under every sharding) when the bus bandwidth
// is below RINGMASTER_SLOW_LINK_GBITS (default 5 Gbit/s), none otherwise; the choice is
// broadcast so every rank agrees.
absl::StatusOr<WireCodec> ChooseAutoCodec(Communicator& world) {
  double threshold = 5.0;
  if (const char* v = std::getenv("RINGMASTER_SLOW_LINK_GBITS"); v != nullptr && *v != '\0') {
    if (!absl::SimpleAtod(v, &threshold) || !(threshold >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("RINGMASTER_SLOW_LINK_GBITS=", v, " is not a number of Gbit/s"));
    }
  }
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

absl::StatusOr<LoadedModel> LoadModelDir(const std::string& dir) {
  LoadedModel m;
  RM_ASSIGN_OR_RETURN(HfModel hf, LoadHfModelDir(dir, 0, 0));
  if (hf.classifier_initialized_fresh) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": has no trained classifier (classifier.weight/bias missing)"));
  }
  m.config = hf.config;
  m.layout = std::move(hf.layout);
  m.params = std::move(hf.params);
  m.vocab_path = (fs::path(dir) / "vocab.txt").string();
  m.do_lower_case = ReadDoLowerCase(dir);
  RM_ASSIGN_OR_RETURN(WordPieceTokenizer tok,
                      WordPieceTokenizer::FromVocabFile(m.vocab_path, m.do_lower_case));
  m.tokenizer = std::make_unique<WordPieceTokenizer>(std::move(tok));
  return m;
}

absl::StatusOr<LoadedModel> LoadModelForJob(const JobSpec& job) {
  LoadedModel m;
  const ModelSpec& ms = job.model;
  if (!ms.init_from.empty()) {
    RM_ASSIGN_OR_RETURN(HfModel hf, LoadHfModelDir(ms.init_from, ms.num_labels, job.train.seed));
    if (hf.classifier_initialized_fresh) {
      LogInfo(absl::StrCat(ms.init_from, ": classifier initialised fresh for ", ms.num_labels,
                           " labels"));
    }
    m.config = hf.config;
    m.layout = std::move(hf.layout);
    m.params = std::move(hf.params);
    m.vocab_path = (fs::path(ms.init_from) / "vocab.txt").string();
    m.do_lower_case = ReadDoLowerCase(ms.init_from);
    if (ms.hidden_dropout_prob) m.config.hidden_dropout_prob = *ms.hidden_dropout_prob;
    if (ms.attention_probs_dropout_prob) {
      m.config.attention_probs_dropout_prob = *ms.attention_probs_dropout_prob;
    }
  } else {
    m.config = ms.config;
    m.config.num_labels = ms.num_labels;
    m.vocab_path = ms.vocab;
    m.do_lower_case = ms.do_lower_case;
  }
  RM_ASSIGN_OR_RETURN(WordPieceTokenizer tok,
                      WordPieceTokenizer::FromVocabFile(m.vocab_path, m.do_lower_case));
  if (ms.init_from.empty()) {
    if (m.config.vocab_size == 0) m.config.vocab_size = tok.vocab_size();
    m.config.pad_token_id = tok.special().pad;
    RM_RETURN_IF_ERROR(ValidateBertConfig(m.config, absl::StrCat(job.source, ": model.config")));
    m.layout = MakeBertParamLayout(m.config);
    m.params.assign(m.layout.total, 0.0f);
    InitBertParams(m.config, m.layout, job.train.seed, m.params.data());
  }
  if (tok.vocab_size() > m.config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(m.vocab_path, ": vocab has ", tok.vocab_size(),
                                                   " tokens but the model's vocab_size is ",
                                                   m.config.vocab_size));
  }
  m.tokenizer = std::make_unique<WordPieceTokenizer>(std::move(tok));
  return m;
}

EvalResult Evaluate(BertModel<float>& model, const LoadedModel& m,
                    const std::vector<EncodedExample>& data, int batch_size,
                    std::vector<float>* logits) {
  EvalResult r;
  const int C = m.config.num_labels;
  if (logits != nullptr) logits->assign(data.size() * C, 0.0f);
  auto plan = PlanEpoch(TokenLengths(data), batch_size, /*shuffle=*/false, 0, 0);
  BatchPrefetcher pf(&data, std::move(plan), 0, m.tokenizer->special().pad);
  double loss_sum = 0;
  int64_t correct = 0;
  while (auto batch = pf.Next()) {
    const float loss = model.Forward(m.params.data(), InputsOf(*batch), false, 0);
    loss_sum += static_cast<double>(loss) * batch->batch_size;
    const std::vector<float>& z = model.logits();
    for (int b = 0; b < batch->batch_size; ++b) {
      const float* row = z.data() + static_cast<size_t>(b) * C;
      if (C > 1) {
        const int pred = static_cast<int>(std::max_element(row, row + C) - row);
        if (pred == static_cast<int>(batch->labels[b])) ++correct;
      }
      if (logits != nullptr) {
        std::copy(row, row + C, logits->data() + batch->example_index[b] * C);
      }
    }
    r.examples += batch->batch_size;
  }
  if (r.examples > 0) {
    r.loss = loss_sum / static_cast<double>(r.examples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.examples);
  }
  return r;
}

namespace {
constexpr char kDivergedPayload[] = "ringmaster.dev/diverged";
}  // namespace

absl::Status Diverged(const std::string& message) {
  absl::Status s = absl::InternalError(message);
  s.SetPayload(kDivergedPayload, absl::Cord("1"));
  return s;
}

bool IsDiverged(const absl::Status& status) {
  return status.GetPayload(kDivergedPayload).has_value();
}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const JobSpec& job, DistContext* dist) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->job_ = job;
  RM_ASSIGN_OR_RETURN(t->slowdown_, Slowdown::FromEnv());
  if (job.train.device == Device::kCuda) {
    return absl::UnimplementedError(
        absl::StrCat(job.source, ": train.device: cuda is not available in this build"));
  }
  // The CPU trainer computes in fp32: a half-precision request is refused, not silently run in
  // fp32 (whose speed and memory the user did not plan for). `auto` means fp32 here.
  if (job.train.precision == Precision::kFp16 || job.train.precision == Precision::kBf16) {
    return absl::InvalidArgumentError(absl::StrCat(
        job.source, ": train.precision: ", std::string(SettingName(job.train.precision)),
        " needs train.device: cuda; ",
        "the CPU trainer computes in fp32 (use precision auto or fp32)"));
  }
  DataParallelOptions dpo;
  dpo.sharding = job.distributed.sharding;
  const Compression comp = job.distributed.compression;
  SetCompression(comp, job.distributed.powersgd_rank, &dpo);
  dpo.adam = AdamWOptions{job.train.adam_beta1, job.train.adam_beta2, job.train.adam_eps,
                          job.train.weight_decay};
  dpo.seed = job.train.seed;
  dpo.skip_zero_blocks = job.distributed.skip_zero_blocks;
  if (dist == nullptr) {
    DistEnv single;
    RM_ASSIGN_OR_RETURN(
        t->own_dist_,
        DistContext::Create(single, dpo.sharding == Sharding::kHybridShard, absl::Seconds(300)));
    dist = t->own_dist_.get();
  }
  t->dist_ = dist;
  if (comp == Compression::kAuto && dist->world_size() > 1) {
    if (dist->env().num_nodes > 1) {
      RM_ASSIGN_OR_RETURN(dpo.codec, ChooseAutoCodec(*dist->world()));
    } else if (dist->rank() == 0) {
      LogInfo("compression auto: all ranks on one node: none");
    }
  }
  RM_ASSIGN_OR_RETURN(t->model_, LoadModelForJob(job));
  const int max_len = std::min(job.data.max_seq_len, t->model_.config.max_position_embeddings);
  t->max_len_ = max_len;
  {
    const auto t_index = std::chrono::steady_clock::now();
    RM_ASSIGN_OR_RETURN(TsvRowIndex index,
                        TsvRowIndex::Build(job.data.train, t->model_.config.num_labels));
    t->train_ = std::make_unique<TsvRowIndex>(std::move(index));
    t->train_keys_ = t->train_->LengthKeys(max_len);
    if (t->leader()) {
      LogInfo(absl::StrFormat(
          "indexed %s: %d rows in %.2f s (%.1f MiB index; rows are tokenised when needed)",
          job.data.train, t->train_->size(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_index).count(),
          t->train_->memory_bytes() / 1048576.0));
    }
  }
  if (!job.data.eval.empty()) {
    RM_ASSIGN_OR_RETURN(t->eval_, LoadEncoded(job.data.eval, t->model_.config.num_labels,
                                              *t->model_.tokenizer, max_len));
  }
  // Every rank runs the same number of micro-batches: enough for the largest share.
  size_t largest = 0;
  for (int r = 0; r < dist->world_size(); ++r) {
    const auto [b, e] = t->SliceOf(static_cast<size_t>(job.train.global_batch_size), r);
    largest = std::max(largest, e - b);
  }
  const size_t mbs = static_cast<size_t>(job.train.micro_batch_size);
  t->accumulation_ = std::max<int>(1, static_cast<int>((largest + mbs - 1) / mbs));
  t->steps_per_epoch_ = static_cast<int64_t>(
      PlanEpoch(t->train_keys_, job.train.global_batch_size, job.data.shuffle, job.train.seed, 0)
          .size());
  t->total_steps_ =
      job.train.max_steps > 0 ? job.train.max_steps : t->steps_per_epoch_ * job.train.epochs;
  t->schedule_.kind = job.train.lr_schedule;
  t->schedule_.base_lr = job.train.lr;
  t->schedule_.total_steps = t->total_steps_;
  t->schedule_.warmup_steps =
      WarmupSteps(job.train.warmup_steps, job.train.warmup_ratio, t->total_steps_);
  // Default (-1): exact all-reduces through the LR warmup and at least the first tenth of the
  // run, where PyTorch's PowerSGD hook advises starting to tune start_powerSGD_iter.
  dpo.powersgd_start_step =
      job.distributed.powersgd_start_step >= 0
          ? job.distributed.powersgd_start_step
          : std::max<int64_t>(t->schedule_.warmup_steps, t->total_steps_ / 10);
  t->net_ = std::make_unique<BertModel<float>>(t->model_.config, t->model_.layout);
  DataParallelComms comms{dist->world(), dist->intra(), dist->inter()};
  RM_ASSIGN_OR_RETURN(t->dp_,
                      DataParallel::Create(t->model_.layout, dpo, comms, t->model_.params.data()));
  // The engine holds the parameters now (only a shard of them under full_shard).
  std::vector<float>().swap(t->model_.params);
  if (t->leader()) {
    RM_RETURN_IF_ERROR(MakeDirs(job.output.dir));
    RM_RETURN_IF_ERROR(
        WriteFileAtomic((fs::path(job.output.dir) / "job.yaml").string(), JobSpecToYaml(job)));
  }
  return t;
}

std::pair<size_t, size_t> Trainer::SliceOf(size_t n, int rank) const {
  const std::vector<double>& weights = dist_->env().rank_weights;
  if (weights.empty()) {
    const size_t w = static_cast<size_t>(dist_->world_size()), r = static_cast<size_t>(rank);
    return {n * r / w, n * (r + 1) / w};
  }
  // Proportional to the weights: boundaries at the rounded cumulative shares.
  double total = 0, before = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += weights[i];
    if (static_cast<int>(i) < rank) before += weights[i];
  }
  auto at = [&](double cum) {
    return std::min(n, static_cast<size_t>(std::llround(static_cast<double>(n) * cum / total)));
  };
  return {at(before), at(before + weights[rank])};
}

std::vector<std::vector<int64_t>> Trainer::ShareOf(const std::vector<int64_t>& global) const {
  const auto [b, e] = SliceOf(global.size(), dist_->rank());
  std::vector<std::vector<int64_t>> micro(accumulation_);
  const size_t mbs = static_cast<size_t>(job_.train.micro_batch_size);
  for (size_t i = b, k = 0; i < e; i += mbs, ++k) {
    // Rounding can leave a weighted share a few rows over accumulation_ micro-batches: the
    // last micro-batch takes them.
    std::vector<int64_t>& dst = micro[std::min<size_t>(k, micro.size() - 1)];
    dst.insert(dst.end(), global.begin() + i, global.begin() + std::min(e, i + mbs));
  }
  return micro;
}

absl::Status Trainer::RestoreLatest() {
  std::vector<std::string> all = ListShardedCheckpoints(job_.output.dir);
  const std::string fingerprint = LayoutFingerprint(model_.layout);
  // Newest first; a checkpoint any rank cannot read is skipped by all ranks together.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    absl::StatusOr<LoadedShard> d =
        LoadShardedCheckpoint(*it, model_.layout.total, fingerprint, dp_->LoadRanges());
    if (!d.ok() && d.status().code() == absl::StatusCode::kFailedPrecondition) return d.status();
    if (d.ok() && d->meta.seed != job_.train.seed) {
      return absl::FailedPreconditionError(absl::StrCat(*it, ": checkpoint was written with seed ",
                                                        d->meta.seed, " but the job has seed ",
                                                        job_.train.seed));
    }
    std::vector<float> bad = {d.ok() ? 0.0f : 1.0f};
    RM_RETURN_IF_ERROR(dp_->AllReduceWorld(&bad));
    if (bad[0] > 0) {
      LogWarning(absl::StrCat("skipping damaged checkpoint: ",
                              d.ok() ? absl::StrCat(*it, ": unreadable on another rank")
                                     : std::string(d.status().message())));
      continue;
    }
    RM_RETURN_IF_ERROR(dp_->LoadFrom(*d, d->meta.step));
    step_ = d->meta.step;
    epoch_ = d->meta.epoch;
    cursor_ = d->meta.cursor;
    samples_seen_ = d->meta.samples_seen;
    if (leader()) {
      LogInfo(absl::StrCat("resumed from ", *it, " (step ", step_, ", epoch ", epoch_ + 1,
                           ", written by ", d->meta.world_size, " rank(s), now ",
                           dist_->world_size(), ")"));
    }
    // Drop metric lines of steps after the checkpoint: they are about to be redone.
    const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
    absl::StatusOr<std::string> text = ReadFile(path);
    if (leader() && text.ok()) {
      std::string kept;
      size_t pos = 0;
      while (pos < text->size()) {
        size_t end = text->find('\n', pos);
        if (end == std::string::npos) end = text->size();
        const std::string line = text->substr(pos, end - pos);
        pos = end + 1;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
            j["step"].get<int64_t>() <= step_) {
          kept += line + "\n";
        }
      }
      RM_RETURN_IF_ERROR(WriteFileAtomic(path, kept));
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Trainer::Checkpoint() {
  CheckpointMeta meta;
  meta.step = step_;
  meta.epoch = epoch_;
  meta.cursor = cursor_;
  meta.samples_seen = samples_seen_;
  meta.seed = job_.train.seed;
  meta.fingerprint = LayoutFingerprint(model_.layout);
  meta.total = model_.layout.total;
  meta.world_size = dist_->world_size();
  meta.sharding = std::string(ShardingName(dp_->options().sharding));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> p, m, v;
  dp_->CopyForSave(&p, &m, &v);
  RM_RETURN_IF_ERROR(SaveShardedCheckpoint(
      job_.output.dir, dist_->rank(), dist_->world_size(), meta, dp_->SaveRanges(), p.data(),
      m.data(), v.data(), job_.output.keep_checkpoints, [&] { return dp_->Barrier(); }));
  metrics_->OnCheckpoint(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      (p.size() + m.size() + v.size()) * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<EvalResult> Trainer::EvaluateAll() {
  // Rank r evaluates a contiguous share; every rank runs the same number of forwards (empty
  // ones included) because full_shard gathers parameters inside each forward.
  const size_t n = eval_.size(), w = static_cast<size_t>(dist_->world_size());
  const size_t r = static_cast<size_t>(dist_->rank());
  const size_t b = n * r / w, e = n * (r + 1) / w;
  const size_t bs = static_cast<size_t>(job_.train.eval_batch_size);
  const size_t passes = ((n + w - 1) / w + bs - 1) / bs;
  const int C = model_.config.num_labels;
  const int32_t pad = model_.tokenizer->special().pad;
  double loss_sum = 0;
  double correct = 0;
  for (size_t k = 0; k < passes; ++k) {
    const size_t lo = std::min(e, b + k * bs), hi = std::min(e, lo + bs);
    dp_->BeginMicroBatch(true, /*training=*/false);
    if (lo == hi) {
      dp_->RunEmptyForward(net_->num_units());
      continue;
    }
    std::vector<int64_t> idx;
    for (size_t i = lo; i < hi; ++i) idx.push_back(static_cast<int64_t>(i));
    Batch batch = MakeBatch(eval_, idx, pad);
    const float loss = net_->Forward(dp_.get(), InputsOf(batch), false, 0);
    loss_sum += static_cast<double>(loss) * batch.batch_size;
    const std::vector<float>& z = net_->logits();
    for (int i = 0; i < batch.batch_size; ++i) {
      const float* row = z.data() + static_cast<size_t>(i) * C;
      if (C > 1 && static_cast<int>(std::max_element(row, row + C) - row) ==
                       static_cast<int>(batch.labels[i])) {
        ++correct;
      }
    }
  }
  RM_RETURN_IF_ERROR(dp_->status());
  std::vector<float> sums = {static_cast<float>(loss_sum), static_cast<float>(correct)};
  RM_RETURN_IF_ERROR(dp_->AllReduceWorld(&sums));
  EvalResult res;
  res.examples = static_cast<int64_t>(n);
  if (n > 0) {
    res.loss = sums[0] / static_cast<double>(n);
    res.accuracy = sums[1] / static_cast<double>(n);
  }
  return res;
}

absl::Status Trainer::AppendMetrics(const nlohmann::json& line) {
  if (!leader()) return absl::OkStatus();
  const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
  std::ofstream f(path, std::ios::app);
  f << line.dump() << "\n";
  f.flush();
  if (!f) return absl::InternalError(absl::StrCat("cannot append to ", path));
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run(const std::atomic<bool>* stop) {
  absl::StatusOr<TrainResult> r = RunSteps(stop);
  if (!r.ok()) return dist_->Explain(r.status());
  return r;
}

absl::StatusOr<TrainResult> Trainer::RunSteps(const std::atomic<bool>* stop) {
  RM_RETURN_IF_ERROR(RestoreLatest());
  TrainResult result;
  const int32_t pad = model_.tokenizer->special().pad;
  const int world = dist_->world_size();
  if (leader()) {
    LogInfo(absl::StrFormat(
        "training %s: %d train rows, %d eval rows, %lld parameters, %d epochs x %lld steps "
        "(global batch %d = %d rank(s) x %d accumulation x micro-batch %d, sharding %s, "
        "compression %s), total %lld steps",
        job_.name, train_->size(), eval_.size(), static_cast<long long>(model_.layout.total),
        job_.train.epochs, static_cast<long long>(steps_per_epoch_), job_.train.global_batch_size,
        world, accumulation_, job_.train.micro_batch_size,
        std::string(SettingName(job_.distributed.sharding)),
        std::string(SettingName(job_.distributed.compression)),
        static_cast<long long>(total_steps_)));
  }
  if (!dist_->env().rank_weights.empty()) {
    const size_t gb = static_cast<size_t>(job_.train.global_batch_size);
    const auto [b, e] = SliceOf(gb, dist_->rank());
    LogInfo(absl::StrFormat("rank %d takes %d of every %d samples (RINGMASTER_RANK_WEIGHTS)",
                            dist_->rank(), static_cast<int>(e - b), static_cast<int>(gb)));
  }
  ProgressReporter progress("train", total_steps_, step_, leader() && ::isatty(2) != 0);
  metrics_->OnStart(world, total_steps_);
  const auto t0 = std::chrono::steady_clock::now();
  bool saved_at_step = false;
  const uint64_t seed = job_.train.seed;
  while (step_ < total_steps_) {
    const auto plan =
        PlanEpoch(train_keys_, job_.train.global_batch_size, job_.data.shuffle, seed, epoch_);
    const int64_t plan_size = static_cast<int64_t>(plan.size());
    // This rank's micro-batches from the cursor on, `accumulation_` per step.
    std::vector<std::vector<int64_t>> mine;
    std::vector<int64_t> step_sizes;
    for (int64_t g = cursor_; g < plan_size; ++g) {
      for (auto& mb : ShareOf(plan[g])) mine.push_back(std::move(mb));
      step_sizes.push_back(static_cast<int64_t>(plan[g].size()));
    }
    {
      // The producer thread reads and tokenises this rank's rows of the next batches (and no
      // others) while the model computes.
      const std::function<std::vector<int32_t>(std::string_view)> encode =
          [this](std::string_view text) {
            encoded_train_rows_.fetch_add(1, std::memory_order_relaxed);
            return model_.tokenizer->Encode(text, max_len_);
          };
      const size_t count = mine.size();
      BatchPrefetcher pf(
          count,
          [this, mine = std::move(mine), encode, pad](size_t i) {
            return MakeIndexedBatch(*train_, mine[i], encode, pad);
          },
          /*depth=*/4);
      int64_t k = 0;  // steps taken from this plan
      while (cursor_ < plan_size && step_ < total_steps_) {
        const int64_t n_total = step_sizes[k++];
        const auto step_start = std::chrono::steady_clock::now();
        StepFigures fig;
        dp_->BeginStep();
        double loss = 0;
        for (int i = 0; i < accumulation_; ++i) {
          const auto wait_start = std::chrono::steady_clock::now();
          std::optional<Batch> batch = pf.Next();
          fig.data_wait_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
          if (!batch) {
            RM_RETURN_IF_ERROR(pf.status());
            return absl::InternalError("data pipeline ended early");
          }
          fig.samples += batch->batch_size;
          for (float mask : batch->attention_mask) fig.tokens += mask > 0 ? 1 : 0;
          dp_->BeginMicroBatch(i + 1 == accumulation_, /*training=*/true);
          if (batch->batch_size == 0) {
            dp_->RunEmptyMicroBatch(net_->num_units());
            continue;
          }
          const float w = static_cast<float>(batch->batch_size) / static_cast<float>(n_total);
          const uint64_t ds = DropoutSeed(seed, step_, dist_->rank() * accumulation_ + i);
          slowdown_.Begin();
          const float l = net_->Forward(dp_.get(), InputsOf(*batch), true, ds);
          dp_->BeginBackward();
          net_->Backward(dp_.get(), w);
          slowdown_.End();
          loss += static_cast<double>(l) * w;
        }
        RM_RETURN_IF_ERROR(dp_->status());
        const double lr = schedule_.LrAt(step_);
        const bool stop_here = stop != nullptr && stop->load();
        RM_ASSIGN_OR_RETURN(
            DataParallel::StepResult sr,
            dp_->FinishStep(loss, lr, job_.train.max_grad_norm, stop_here ? 1.0f : 0.0f));
        if (!std::isfinite(sr.loss) || !std::isfinite(sr.grad_norm)) {
          // fp32 has no loss scale to lower: the step cannot be skipped and retried. Nothing of
          // this step is checkpointed; the last committed checkpoint stays the latest.
          return Diverged(
              absl::StrCat(std::isfinite(sr.loss) ? absl::StrCat("gradient norm is ", sr.grad_norm)
                                                  : absl::StrCat("loss is ", sr.loss),
                           " at step ", step_ + 1, " (fp32): training diverged; stopping"));
        }
        ++step_;
        ++cursor_;
        samples_seen_ += n_total;
        saved_at_step = false;
        RM_RETURN_IF_ERROR(AppendMetrics({{"step", step_},
                                          {"epoch", epoch_ + 1},
                                          {"loss", sr.loss},
                                          {"lr", lr},
                                          {"grad_norm", sr.grad_norm}}));
        progress.Update(step_, sr.loss, lr, n_total);
        fig.step = step_;
        fig.loss = sr.loss;
        fig.learning_rate = lr;
        fig.grad_norm = sr.grad_norm;
        fig.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
        fig.unix_time =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        const CommCounters& cc = dp_->counters();
        metrics_->OnStep(fig, CommTotals{cc.gather_bytes.load(), cc.reduce_raw_bytes.load(),
                                         cc.reduce_wire_bytes.load()});
        const MemoryStats mem_now = dp_->memory();
        metrics_->OnMemory(mem_now.persistent_bytes, mem_now.peak_transient_bytes);
        if (cursor_ >= plan_size) {
          if (!eval_.empty()) {
            RM_ASSIGN_OR_RETURN(result.eval, EvaluateAll());
            metrics_->OnEval(result.eval.loss, result.eval.accuracy);
            progress.Message(absl::StrFormat("epoch %d: eval loss %.4f accuracy %.4f (%d rows)",
                                             epoch_ + 1, result.eval.loss, result.eval.accuracy,
                                             result.eval.examples));
            RM_RETURN_IF_ERROR(AppendMetrics({{"step", step_},
                                              {"epoch", epoch_ + 1},
                                              {"eval_loss", result.eval.loss},
                                              {"eval_accuracy", result.eval.accuracy}}));
          }
          ++epoch_;
          cursor_ = 0;
        }
        // Any rank asked to stop stops every rank (they all must join the checkpoint).
        const bool stopping = sr.flag_sum > 0;
        const bool periodic = job_.output.checkpoint_every_steps > 0 &&
                              step_ % job_.output.checkpoint_every_steps == 0;
        if (periodic || stopping) {
          RM_RETURN_IF_ERROR(Checkpoint());
          saved_at_step = true;
        }
        if (stopping) {
          progress.Finish();
          LogInfo(absl::StrCat("stopped by signal at step ", step_, "; checkpoint saved"));
          result.steps = step_;
          result.interrupted = true;
          return result;
        }
        if (cursor_ == 0) break;  // epoch finished: the next one has its own plan
      }
    }
  }
  progress.Finish();
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Evaluate when the run ended mid-epoch (max_steps) so the result always has a figure.
  if (!eval_.empty() && result.eval.examples == 0) {
    RM_ASSIGN_OR_RETURN(result.eval, EvaluateAll());
    if (leader()) {
      LogInfo(absl::StrFormat("eval loss %.4f accuracy %.4f (%d rows)", result.eval.loss,
                              result.eval.accuracy, result.eval.examples));
    }
  }
  if (!saved_at_step) RM_RETURN_IF_ERROR(Checkpoint());
  result.steps = step_;
  result.export_dir = (fs::path(job_.output.dir) / "final").string();
  std::vector<float> full;
  RM_RETURN_IF_ERROR(dp_->GatherFullParams(&full));
  if (leader()) {
    RM_RETURN_IF_ERROR(ExportHfModelDir(result.export_dir, model_.config, model_.layout,
                                        full.data(), model_.vocab_path, model_.do_lower_case));
    LogInfo(absl::StrCat("exported ", result.export_dir));
  }
  const MemoryStats mem = dp_->memory();
  metrics_->OnMemory(mem.persistent_bytes, mem.peak_transient_bytes);
  const CommCounters& cc = dp_->counters();
  LogInfo(absl::StrFormat(
      "rank %d: state memory %.1f MiB persistent + %.1f MiB peak transient; sent %.1f MiB "
      "gathers, %.1f MiB reductions (%.1f MiB as fp32)",
      dist_->rank(), mem.persistent_bytes / 1048576.0, mem.peak_transient_bytes / 1048576.0,
      cc.gather_bytes.load() / 1048576.0, cc.reduce_wire_bytes.load() / 1048576.0,
      cc.reduce_raw_bytes.load() / 1048576.0));
  // Per-rank figures for benchmarks and tests: output.dir/ranks/rank-<r>.json.
  const fs::path ranks_dir = fs::path(job_.output.dir) / "ranks";
  RM_RETURN_IF_ERROR(MakeDirs(ranks_dir.string()));
  const nlohmann::json stats = {{"rank", dist_->rank()},
                                {"world_size", dist_->world_size()},
                                {"sharding", SettingName(job_.distributed.sharding)},
                                {"compression", SettingName(job_.distributed.compression)},
                                {"persistent_state_bytes", mem.persistent_bytes},
                                {"peak_transient_bytes", mem.peak_transient_bytes},
                                {"gather_bytes", cc.gather_bytes.load()},
                                {"reduce_wire_bytes", cc.reduce_wire_bytes.load()},
                                {"reduce_raw_bytes", cc.reduce_raw_bytes.load()},
                                {"steps", step_},
                                {"train_seconds", train_seconds},
                                {"train_rows", train_->size()},
                                {"encoded_train_rows", encoded_train_rows_.load()}};
  RM_RETURN_IF_ERROR(WriteFileAtomic(
      (ranks_dir / absl::StrCat("rank-", dist_->rank(), ".json")).string(), stats.dump(2) + "\n"));
  RM_RETURN_IF_ERROR(dp_->Barrier());  // nobody exits before the export is written
  return result;
}

}  // namespace ringmaster::trainer
