#include "trainer/train/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/log.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"
#include "trainer/data/tsv.h"
#include "trainer/io/hf_model_dir.h"
#include "trainer/io/hf_tokenizer_files.h"
#include "trainer/io/model_paths.h"
#include "trainer/model/cpu_isa.h"
#include "trainer/parallel/sharding_plan.h"
#include "trainer/train/cpu_engine.h"

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

absl::StatusOr<std::vector<EncodedExample>> LoadEncoded(const std::string& path,
                                                        const TableOptions& options, int num_labels,
                                                        const WordPieceTokenizer& tok,
                                                        int max_len) {
  RM_ASSIGN_OR_RETURN(std::vector<Example> rows, ReadTable(path, options, num_labels));
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows"));
  if (!options.text_pair_column.empty()) {
    return EncodeAllPairs(rows,
                          [&](std::string_view a, std::string_view b, std::vector<int32_t>* types) {
                            return tok.EncodePair(a, b, max_len, types);
                          });
  }
  return EncodeAll(rows, [&](std::string_view s) { return tok.Encode(s, max_len); });
}

// output.dir, made so that no write of this run can leave it (issue #20, item 2). Under an
// agent with --allowed-root, RINGMASTER_ALLOWED_ROOT names the root: output.dir is created
// below it following no link. Everything the run writes below output.dir is opened the same
// way (file_util.h); a link already planted where the run writes is refused here, up front, as
// the job's fault (exit 3) rather than at the first checkpoint.
absl::Status MakeOutputDir(const std::string& dir) {
  const std::string root = AllowedRoot();
  if (!root.empty()) {
    if (absl::Status s = MakeDirsBeneath(root, dir); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("output.dir: ", s.message()));
    }
  } else {
    RM_RETURN_IF_ERROR(MakeDirs(dir));
  }
  for (const char* name : {"checkpoints", "ranks", "final", "metrics.jsonl", "job.yaml"}) {
    std::error_code ec;
    if (fs::is_symlink(fs::path(dir) / name, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output.dir: ", (fs::path(dir) / name).string(),
                       " is a symbolic link; the trainer writes there and follows no link "
                       "(remove it)"));
    }
  }
  // metrics.jsonl is appended to: a hard link planted there (to a file outside the root) would
  // receive the lines (issue #31, finding 6b). AppendFileBeneath refuses it at every line too.
  struct stat st {};
  const std::string metrics = (fs::path(dir) / "metrics.jsonl").string();
  if (::lstat(metrics.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output.dir: ", metrics, " has ", st.st_nlink,
        " hard links; it may be a link to a file elsewhere and the trainer appends to it "
        "(remove it)"));
  }
  // From here on everything below output.dir is reached from this one handle: a directory
  // swapped for a link later cannot redirect the run's writes (issue #31, finding 6a).
  if (absl::Status s = PinRoot(dir, root); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("output.dir: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The tokenizer of the model directory `dir` (vocab.txt, else tokenizer.json), recording where
// it came from, its casing, its mode (`compat`, else what the directory records) and its
// model_max_length in *m.
absl::StatusOr<WordPieceTokenizer> LoadTokenizer(const std::string& dir,
                                                 std::optional<TokenizerCompat> compat,
                                                 LoadedModel* m) {
  RM_ASSIGN_OR_RETURN(HfTokenizerSource src, ReadHfTokenizer(dir));
  m->vocab_path = src.source;
  m->do_lower_case = src.do_lower_case;
  m->tokenizer_compat = compat.value_or(src.compat);
  m->model_max_length = src.model_max_length;
  const WordPieceOptions options{.do_lower_case = src.do_lower_case, .compat = m->tokenizer_compat};
  if (!src.vocab_path.empty()) return WordPieceTokenizer::FromVocabFile(src.vocab_path, options);
  return WordPieceTokenizer::FromVocabTokens(std::move(src.tokens), options, src.source);
}

// vocab.txt's contents for an export: the file itself when the model had one, else the tokens
// one per line.
absl::StatusOr<std::string> VocabText(const LoadedModel& m) {
  if (m.vocab_path.ends_with(".txt")) return ReadFile(m.vocab_path);
  std::string text;
  for (int32_t i = 0; i < m.tokenizer->vocab_size(); ++i) {
    absl::StrAppend(&text, m.tokenizer->token(i), "\n");
  }
  return text;
}

}  // namespace

TableOptions TableOptionsForJob(const JobSpec& job) {
  TableOptions o;
  o.format = job.data.format;
  o.text_column = job.data.text_column;
  o.label_column = job.data.label_column;
  o.text_pair_column = job.data.text_pair_column;
  o.labels = job.data.labels;
  return o;
}

absl::StatusOr<LoadedModel> LoadModelDir(const std::string& dir,
                                         std::optional<TokenizerCompat> compat) {
  LoadedModel m;
  RM_ASSIGN_OR_RETURN(HfModel hf, LoadHfModelDir(dir, 0, 0));
  if (!hf.note.empty()) LogInfo(hf.note);
  if (hf.classifier_initialized_fresh) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": has no trained classifier (classifier.weight/bias missing)"));
  }
  m.config = hf.config;
  m.layout = std::move(hf.layout);
  m.params = std::move(hf.params);
  RM_ASSIGN_OR_RETURN(WordPieceTokenizer tok, LoadTokenizer(hf.dir, compat, &m));
  m.tokenizer = std::make_unique<WordPieceTokenizer>(std::move(tok));
  const std::string columns_path = (fs::path(hf.dir) / kDataColumnsFile).string();
  if (fs::exists(columns_path)) {
    RM_RETURN_IF_ERROR(CheckModelPathBeneathRoot(columns_path));
    RM_ASSIGN_OR_RETURN(std::string text, ReadFile(columns_path, 1 << 20));
    const nlohmann::json j = ParseJsonLimited(text, columns_path).value_or(nlohmann::json());
    auto get = [&j](const char* key, std::string* out) {
      if (j.is_object() && j.contains(key) && j[key].is_string()) *out = j[key].get<std::string>();
    };
    if (!j.is_object()) return absl::InvalidArgumentError(columns_path + ": not a JSON object");
    get("text_column", &m.columns.text_column);
    get("text_pair_column", &m.columns.text_pair_column);
    get("label_column", &m.columns.label_column);
  }
  return m;
}

namespace {

// The model's class names; empty when they are transformers' defaults (LABEL_0, LABEL_1, ...).
std::vector<std::string> LabelNames(const BertConfig& config) {
  for (size_t c = 0; c < config.id2label.size(); ++c) {
    if (config.id2label[c] != absl::StrCat("LABEL_", c)) return config.id2label;
  }
  return {};
}

}  // namespace

absl::StatusOr<std::string> PredictFile(const LoadedModel& m, const std::string& input, int max_len,
                                        bool probabilities) {
  if (probabilities && m.config.num_labels < 2) {
    return absl::InvalidArgumentError(
        "--probabilities: the model is a regression model (num_labels 1): its output is a "
        "score, not class probabilities");
  }
  TableOptions columns = m.columns;
  columns.labels = LabelNames(m.config);  // an input's label column may hold the names
  RM_ASSIGN_OR_RETURN(std::vector<Example> rows, ReadTableForPredict(input, columns));
  const WordPieceTokenizer& tok = *m.tokenizer;
  std::vector<EncodedExample> data =
      m.columns.text_pair_column.empty()
          ? EncodeAll(rows, [&](std::string_view s) { return tok.Encode(s, max_len); })
          : EncodeAllPairs(
                rows, [&](std::string_view a, std::string_view b, std::vector<int32_t>* types) {
                  return tok.EncodePair(a, b, max_len, types);
                });
  for (auto& e : data) e.label = 0;  // predict ignores labels
  BertModel<float> model(m.config, m.layout);
  std::vector<float> logits;
  Evaluate(model, m, data, 64, &logits);
  const int C = m.config.num_labels;
  auto name_of = [&m](int c) {
    return static_cast<size_t>(c) < m.config.id2label.size() ? m.config.id2label[c]
                                                             : absl::StrCat("LABEL_", c);
  };
  // A model without label names (LABEL_0, LABEL_1, ...) predicts ids, as the data's labels are.
  const bool named = !columns.labels.empty();
  std::string out = "label";
  for (int c = 0; c < C; ++c) absl::StrAppend(&out, "\t", name_of(c));
  out += "\n";
  std::vector<double> probs(static_cast<size_t>(C));
  for (size_t i = 0; i < data.size(); ++i) {
    const float* row = logits.data() + i * C;
    const int pred = C > 1 ? static_cast<int>(std::max_element(row, row + C) - row) : 0;
    absl::StrAppend(&out, named ? name_of(pred) : absl::StrCat(pred));
    if (probabilities) {
      // A stable softmax in double, as the pipeline's (it subtracts the maximum too).
      double sum = 0;
      for (int c = 0; c < C; ++c) sum += probs[c] = std::exp(double{row[c]} - double{row[pred]});
      for (int c = 0; c < C; ++c)
        absl::StrAppend(&out, "\t", absl::StrFormat("%.7g", probs[c] / sum));
    } else {
      for (int c = 0; c < C; ++c) absl::StrAppend(&out, "\t", absl::StrFormat("%.7g", row[c]));
    }
    out += "\n";
  }
  return out;
}

absl::StatusOr<LoadedModel> LoadModelForJob(const JobSpec& job) {
  LoadedModel m;
  const ModelSpec& ms = job.model;
  std::string hf_dir;  // init_from, or a sentence-transformers model's transformer folder
  if (!ms.init_from.empty()) {
    RM_ASSIGN_OR_RETURN(HfModel hf, LoadHfModelDir(ms.init_from, ms.num_labels, job.train.seed));
    hf_dir = hf.dir;
    if (hf.classifier_initialized_fresh) {
      LogInfo(absl::StrCat(ms.init_from, ": classifier initialised fresh for ", ms.num_labels,
                           " labels"));
    }
    if (!hf.note.empty()) LogInfo(hf.note);
    m.config = hf.config;
    m.layout = std::move(hf.layout);
    m.params = std::move(hf.params);
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
  std::optional<WordPieceTokenizer> loaded;
  if (!ms.init_from.empty()) {
    // The job's mode, not what init_from's directory may record.
    RM_ASSIGN_OR_RETURN(loaded, LoadTokenizer(hf_dir, ms.tokenizer_compat, &m));
  } else {
    m.tokenizer_compat = ms.tokenizer_compat;
    RM_ASSIGN_OR_RETURN(
        loaded, WordPieceTokenizer::FromVocabFile(m.vocab_path, {.do_lower_case = m.do_lower_case,
                                                                 .compat = m.tokenizer_compat}));
  }
  WordPieceTokenizer& tok = *loaded;
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

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const JobSpec& job,
                                                         const RankSettings& settings,
                                                         DistContext* dist,
                                                         const CudaEngineFactory& cuda) {
  std::unique_ptr<Trainer> t(new Trainer());
  // Confined by an agent's --allowed-root (SetAllowedRoot, at start-up): no input is read
  // through a hard link, which may be one to a file outside the root (issue #31, finding 6b).
  if (!AllowedRoot().empty()) SetRefuseHardLinkedInputs(true);
  // The settings were checked when resolved (ResolveRankSettings refuses device cuda in a build
  // without the CUDA engine): a CUDA rank without a factory is a caller's mistake.
  const bool on_cuda = settings.device == jobspec::Device::kCuda;
  if (on_cuda && !cuda) {
    return absl::InternalError("Trainer::Create: a CUDA rank, but no CUDA engine factory");
  }
  CpuEngineOptions engine_options;
  if (!on_cuda) {
    // The CPU engine's loops at RINGMASTER_CPU_ISA's level when set (trainer/model/cpu_isa.h).
    RM_RETURN_IF_ERROR(cpu::SetIsaByName(settings.cpu_isa));
    engine_options = CpuEngineOptionsFor(job, settings);
  }
  if (dist == nullptr) {
    DistEnv single;
    RM_ASSIGN_OR_RETURN(
        t->own_dist_,
        DistContext::Create(single,
                            ShardingTraits::For(job.distributed.sharding).replicate_across_nodes,
                            absl::Seconds(300)));
    dist = t->own_dist_.get();
  }
  t->dist_ = dist;
  if (!on_cuda) RM_RETURN_IF_ERROR(ResolveAutoCompression(*dist, &engine_options));
  const bool leader = dist->rank() == 0;
  RM_ASSIGN_OR_RETURN(LoadedModel model, LoadModelForJob(job));
  const int max_len = std::min(job.data.max_seq_len, model.config.max_position_embeddings);
  // The export's tokenizer: this vocabulary, truncating where training did.
  HfTokenizerExport export_tokenizer;
  RM_ASSIGN_OR_RETURN(export_tokenizer.vocab_text, VocabText(model));
  export_tokenizer.do_lower_case = model.do_lower_case;
  export_tokenizer.compat = model.tokenizer_compat;
  export_tokenizer.model_max_length = max_len;
  TrainData data;
  TableOptions table = TableOptionsForJob(job);
  {
    const auto t_index = std::chrono::steady_clock::now();
    RM_ASSIGN_OR_RETURN(TsvRowIndex index,
                        TsvRowIndex::Build(job.data.train, model.config.num_labels, table));
    data.train = std::make_unique<TsvRowIndex>(std::move(index));
    data.train_keys = data.train->LengthKeys(max_len);
    if (leader) {
      LogInfo(absl::StrFormat(
          "indexed %s: %d rows in %.2f s (%.1f MiB index; rows are tokenised when needed)",
          job.data.train, data.train->size(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_index).count(),
          data.train->memory_bytes() / 1048576.0));
    }
  }
  // Class names: data.labels, or inferred from the training file; the evaluation file uses the
  // same, and the export writes them to config.json (id2label, label2id).
  if (!data.train->label_names().empty()) {
    table.labels = data.train->label_names();
    if (leader && job.data.labels.empty()) {
      std::string ids;
      for (size_t i = 0; i < table.labels.size(); ++i) {
        absl::StrAppend(&ids, i == 0 ? "" : ", ", table.labels[i], "=", i);
      }
      LogInfo(absl::StrCat("labels inferred from ", job.data.train, " (sorted; set data.labels to ",
                           "choose the order): ", ids));
    }
    model.config.id2label = table.labels;
  } else {
    table.infer_labels = false;  // the training labels are ids: the evaluation's must be too
    if (model.config.id2label.size() != static_cast<size_t>(model.config.num_labels)) {
      model.config.id2label.clear();
    }
  }
  if (!job.data.eval.empty()) {
    RM_ASSIGN_OR_RETURN(data.eval, LoadEncoded(job.data.eval, table, model.config.num_labels,
                                               *model.tokenizer, max_len));
  }
  data.pad_id = model.tokenizer->special().pad;
  data.num_labels = model.config.num_labels;
  // The encoder owns the tokenizer now (the loop calls it on its prefetch thread).
  std::shared_ptr<const WordPieceTokenizer> tokenizer = std::move(model.tokenizer);
  data.encode = [tokenizer, max_len](std::string_view text) {
    return tokenizer->Encode(text, max_len);
  };
  if (data.train->has_pairs()) {
    data.encode_pair = [tokenizer, max_len](std::string_view a, std::string_view b,
                                            std::vector<int32_t>* types) {
      return tokenizer->EncodePair(a, b, max_len, types);
    };
  }
  const LoopWorld world{dist->rank(), dist->world_size(), settings.rank_weights,
                        dist->env().restart_count};
  TrainPlan plan = MakeTrainPlan(job, world, data.train_keys);
  std::unique_ptr<StepEngine> engine;
  if (on_cuda) {
    RM_ASSIGN_OR_RETURN(engine, cuda(job, settings, model.config, model.layout, model.params.data(),
                                     *dist, plan.total_steps, plan.schedule.warmup_steps));
  } else {
    RM_ASSIGN_OR_RETURN(
        engine, CpuEngine::Create(engine_options, model.config, model.layout, model.params.data(),
                                  plan.total_steps, plan.schedule.warmup_steps, *dist));
  }
  // The engine holds the parameters now (only a shard of them under full_shard).
  std::vector<float>().swap(model.params);
  // output.dir/job.yaml is the loop's to write, once it has decided to train (resume_policy.h).
  // Every rank opens output.dir once (its shards are written there too).
  RM_RETURN_IF_ERROR(MakeOutputDir(job.output.dir));
  const std::string columns_json = nlohmann::json{{"text_column", table.text_column},
                                                  {"text_pair_column", table.text_pair_column},
                                                  {"label_column", table.label_column}}
                                       .dump(2) +
                                   "\n";
  ExportModel export_model = [columns_json, config = model.config, layout = std::move(model.layout),
                              tok = std::move(export_tokenizer)](const std::string& dir,
                                                                 const float* params) {
    return ExportHfModelDir(dir, config, layout, params, tok, {{kDataColumnsFile, columns_json}});
  };
  t->loop_ = std::make_unique<TrainLoop>(job, world, std::move(data), std::move(plan),
                                         std::move(engine), std::move(export_model));
  return t;
}

absl::StatusOr<TrainResult> Trainer::Run(const std::atomic<bool>* stop) {
  absl::StatusOr<TrainResult> r = loop_->Run(stop);
  // A refused resume is the job's settings, not a peer's failure: nothing to explain.
  if (!r.ok() && IsSettingsChanged(r.status())) return r.status();
  if (!r.ok()) return dist_->Explain(r.status());
  return r;
}

}  // namespace ringmaster::trainer
