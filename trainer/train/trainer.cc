#include "trainer/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "trainer/data/tsv.h"
#include "trainer/io/hf_model_dir.h"
#include "trainer/model/cpu_ops.h"
#include "trainer/train/checkpoint.h"

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
  auto plan = PlanEpoch(data, batch_size, /*shuffle=*/false, 0, 0);
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

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const JobSpec& job) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->job_ = job;
  if (job.train.device == "cuda") {
    return absl::UnimplementedError(
        absl::StrCat(job.source, ": train.device: cuda is not available in this build"));
  }
  RM_ASSIGN_OR_RETURN(t->model_, LoadModelForJob(job));
  const int max_len = std::min(job.data.max_seq_len, t->model_.config.max_position_embeddings);
  RM_ASSIGN_OR_RETURN(t->train_, LoadEncoded(job.data.train, t->model_.config.num_labels,
                                             *t->model_.tokenizer, max_len));
  if (!job.data.eval.empty()) {
    RM_ASSIGN_OR_RETURN(t->eval_, LoadEncoded(job.data.eval, t->model_.config.num_labels,
                                              *t->model_.tokenizer, max_len));
  }
  t->accumulation_ = job.train.global_batch_size / job.train.micro_batch_size;
  const int64_t micro_per_epoch = static_cast<int64_t>(
      PlanEpoch(t->train_, job.train.micro_batch_size, job.data.shuffle, job.train.seed, 0).size());
  t->steps_per_epoch_ = (micro_per_epoch + t->accumulation_ - 1) / t->accumulation_;
  t->total_steps_ =
      job.train.max_steps > 0 ? job.train.max_steps : t->steps_per_epoch_ * job.train.epochs;
  t->schedule_.kind = job.train.lr_schedule;
  t->schedule_.base_lr = job.train.lr;
  t->schedule_.total_steps = t->total_steps_;
  t->schedule_.warmup_steps =
      WarmupSteps(job.train.warmup_steps, job.train.warmup_ratio, t->total_steps_);
  t->net_ = std::make_unique<BertModel<float>>(t->model_.config, t->model_.layout);
  t->opt_ = std::make_unique<AdamW>(
      t->model_.layout, AdamWOptions{job.train.adam_beta1, job.train.adam_beta2, job.train.adam_eps,
                                     job.train.weight_decay});
  t->grads_.assign(t->model_.layout.total, 0.0f);
  RM_RETURN_IF_ERROR(MakeDirs(job.output.dir));
  RM_RETURN_IF_ERROR(
      WriteFileAtomic((fs::path(job.output.dir) / "job.yaml").string(), JobSpecToYaml(job)));
  return t;
}

absl::Status Trainer::RestoreLatest() {
  std::vector<std::string> all = ListCheckpoints(job_.output.dir);
  // Newest first; a damaged newest checkpoint falls back to the one before it.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    absl::StatusOr<CheckpointData> d = LoadCheckpoint(*it, model_.layout);
    if (!d.ok()) {
      if (d.status().code() == absl::StatusCode::kFailedPrecondition) return d.status();
      LogWarning(absl::StrCat("skipping damaged checkpoint: ", d.status().message()));
      continue;
    }
    if (d->state.seed != job_.train.seed) {
      return absl::FailedPreconditionError(absl::StrCat(*it, ": checkpoint was written with seed ",
                                                        d->state.seed, " but the job has seed ",
                                                        job_.train.seed));
    }
    model_.params = std::move(d->params);
    opt_->exp_avg() = std::move(d->exp_avg);
    opt_->exp_avg_sq() = std::move(d->exp_avg_sq);
    opt_->set_step(d->state.step);
    step_ = d->state.step;
    epoch_ = d->state.epoch;
    cursor_ = d->state.cursor;
    samples_seen_ = d->state.samples_seen;
    LogInfo(absl::StrCat("resumed from ", *it, " (step ", step_, ", epoch ", epoch_ + 1, ")"));
    // Drop metric lines of steps after the checkpoint: they are about to be redone.
    const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
    absl::StatusOr<std::string> text = ReadFile(path);
    if (text.ok()) {
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
  TrainerState s{step_,         epoch_,          cursor_,
                 samples_seen_, job_.train.seed, LayoutFingerprint(model_.layout)};
  return SaveCheckpoint(job_.output.dir, model_.layout, s, model_.params.data(),
                        opt_->exp_avg().data(), opt_->exp_avg_sq().data(),
                        job_.output.keep_checkpoints);
}

absl::Status Trainer::AppendMetrics(const nlohmann::json& line) {
  const std::string path = (fs::path(job_.output.dir) / "metrics.jsonl").string();
  std::ofstream f(path, std::ios::app);
  f << line.dump() << "\n";
  f.flush();
  if (!f) return absl::InternalError(absl::StrCat("cannot append to ", path));
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run(const std::atomic<bool>* stop) {
  RM_RETURN_IF_ERROR(RestoreLatest());
  TrainResult result;
  const int micro = job_.train.micro_batch_size;
  const int32_t pad = model_.tokenizer->special().pad;
  LogInfo(absl::StrFormat(
      "training %s: %d train rows, %d eval rows, %lld parameters, %d epochs x %lld steps "
      "(global batch %d = %d x %d accumulation), total %lld steps",
      job_.name, train_.size(), eval_.size(), static_cast<long long>(model_.layout.total),
      job_.train.epochs, static_cast<long long>(steps_per_epoch_), job_.train.global_batch_size,
      micro, accumulation_, static_cast<long long>(total_steps_)));
  ProgressReporter progress("train", total_steps_, step_, ::isatty(2) != 0);
  bool saved_at_step = false;
  while (step_ < total_steps_) {
    auto plan = PlanEpoch(train_, micro, job_.data.shuffle, job_.train.seed, epoch_);
    const int64_t plan_size = static_cast<int64_t>(plan.size());
    std::vector<int> sizes;
    for (const auto& mb : plan) sizes.push_back(static_cast<int>(mb.size()));
    {
      BatchPrefetcher pf(&train_, std::move(plan), static_cast<size_t>(cursor_), pad);
      while (cursor_ < plan_size && step_ < total_steps_) {
        const int group = static_cast<int>(std::min<int64_t>(accumulation_, plan_size - cursor_));
        int64_t n_total = 0;
        for (int i = 0; i < group; ++i) n_total += sizes[cursor_ + i];
        std::fill(grads_.begin(), grads_.end(), 0.0f);
        double loss = 0;
        for (int i = 0; i < group; ++i) {
          std::optional<Batch> batch = pf.Next();
          if (!batch) return absl::InternalError("data pipeline ended early");
          const float w = static_cast<float>(batch->batch_size) / static_cast<float>(n_total);
          const float l = net_->Forward(model_.params.data(), InputsOf(*batch), true,
                                        DropoutSeed(job_.train.seed, step_, i));
          net_->Backward(model_.params.data(), grads_.data(), w);
          loss += static_cast<double>(l) * w;
        }
        if (!std::isfinite(loss)) {
          return absl::InternalError(
              absl::StrCat("loss is ", loss, " at step ", step_ + 1, " (fp32): stopping"));
        }
        const double norm = ClipGradNorm(grads_.data(), grads_.size(), job_.train.max_grad_norm);
        const double lr = schedule_.LrAt(step_);
        opt_->Step(model_.params.data(), grads_.data(), lr);
        ++step_;
        cursor_ += group;
        samples_seen_ += n_total;
        saved_at_step = false;
        RM_RETURN_IF_ERROR(AppendMetrics({{"step", step_},
                                          {"epoch", epoch_ + 1},
                                          {"loss", loss},
                                          {"lr", lr},
                                          {"grad_norm", norm}}));
        progress.Update(step_, loss, lr, n_total);
        if (cursor_ >= plan_size) {
          if (!eval_.empty()) {
            result.eval = Evaluate(*net_, model_, eval_, job_.train.eval_batch_size, nullptr);
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
        const bool periodic = job_.output.checkpoint_every_steps > 0 &&
                              step_ % job_.output.checkpoint_every_steps == 0;
        const bool stopping = stop != nullptr && stop->load();
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
  // Evaluate when the run ended mid-epoch (max_steps) so the result always has a figure.
  if (!eval_.empty() && result.eval.examples == 0) {
    result.eval = Evaluate(*net_, model_, eval_, job_.train.eval_batch_size, nullptr);
    LogInfo(absl::StrFormat("eval loss %.4f accuracy %.4f (%d rows)", result.eval.loss,
                            result.eval.accuracy, result.eval.examples));
  }
  if (!saved_at_step) RM_RETURN_IF_ERROR(Checkpoint());
  result.steps = step_;
  result.export_dir = (fs::path(job_.output.dir) / "final").string();
  RM_RETURN_IF_ERROR(ExportHfModelDir(result.export_dir, model_.config, model_.layout,
                                      model_.params.data(), model_.vocab_path,
                                      model_.do_lower_case));
  LogInfo(absl::StrCat("exported ", result.export_dir));
  return result;
}

}  // namespace ringmaster::trainer
