// ringmaster-trainer: train | predict | tokenize | gen-data | probe (docs/trainer.md; the rank's
// contract with its agent: docs/architecture.md, "The job's path"). Errors are one line on stderr
// and a non-zero exit: 3 for a bad job (exit_codes.h). This file only wires: the environment is
// read by trainer/parallel/dist_env.h, the rank's settings resolved by rank_settings.h.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/loopback.h"
#include "common/metrics_server.h"
#include "common/open_beneath.h"
#include "common/rank_status.h"
#include "common/status_macros.h"
#include "common/user_output.h"
#include "jobspec/default_job.h"
#include "jobspec/job_spec.h"
#include "jobspec/model_source.h"
#include "trainer/data/sentiment_gen.h"
#if RINGMASTER_HAVE_NCCL
#include "trainer/comm/nccl_communicator.h"
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif
#include "trainer/data/tsv.h"
#if RINGMASTER_HAVE_CUDA_ENGINE
#include "trainer/cuda/engine/cuda_engine_factory.h"
#include "trainer/cuda/engine/gpu_probe.h"
#endif
#include "trainer/model/omp_wait_default.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/parallel/dist_env.h"
#include "trainer/parallel/rank_settings.h"
#include "trainer/train/throughput_probe.h"
#include "trainer/train/trainer.h"

namespace rt = ringmaster::trainer;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
// Until the training loop runs, there is nothing to checkpoint and the rendezvous may block for
// the collective timeout: SIGTERM / SIGINT end the process at once (143, as after a checkpoint).
// Inside the loop they ask every rank to checkpoint and stop together.
std::atomic<bool> g_in_loop{false};
void OnSignal(int) {
  if (!g_in_loop.load()) ::_exit(ringmaster::kExitTerminated);
  g_stop.store(true);
}

// The flags given to the command: values by name, switches that are on.
struct Args {
  std::map<std::string, std::string> values;
  std::vector<std::string> switches;
};

// Every command and flag, in the parser every binary uses (common/flags.h).
void DefineFlags(ringmaster::FlagSet& f) {
  f.AddCommand("train", "",
               "Trains a job: one process, or one rank of many under the torchrun environment\n"
               "(RANK, WORLD_SIZE, MASTER_ADDR, ...).",
               "Without --config: the embedded demo job (generates its data under runs/demo).");
  f.AddCommand("predict", "--model DIR --input FILE",
               "Classifies sentences: a header, then one line per input row: the predicted\n"
               "label (its name when the model has label names, else its id), then one column\n"
               "per class: the logits, or with --probabilities their softmax (TSV).");
  f.AddCommand("tokenize", "--vocab FILE",
               "Prints the WordPiece ids ([CLS] ... [SEP]) of each stdin line.");
  f.AddCommand("gen-data", "--out DIR", "Writes the synthetic sentiment dataset the demo uses.");
  f.AddCommand("print-default-job", "", "Prints the embedded demo job's YAML.");
  f.AddCommand("probe", "", "Measures training throughput here; prints one JSON line.");
  f.Value("--config", "JOB.yaml", nullptr, "the embedded demo job", "the job to train", {"train"});
  f.Value("--device", "cpu|cuda|auto", nullptr, "the job's train.device (or the plan's)",
          "the engine", {"train"});
  f.Value("--metrics-port", "N", nullptr, "$RINGMASTER_METRICS_PORT + LOCAL_RANK, else none",
          "serves /metrics on this port (0: a free one, logged)", {"train"});
  f.Switch("--resume", nullptr,
           "train.resume: force (resume from the newest checkpoint even though settings\n"
           "changed)",
           {"train"});
  f.Switch("--overwrite", nullptr,
           "train.resume: never (start over, removing the previous run's output)", {"train"});
  f.Value("--model", "DIR", nullptr, "required", "a Hugging Face model directory (a run's final/)",
          {"predict"});
  f.Value("--input", "FILE", nullptr, "required",
          "sentences: TSV, CSV or JSONL (by extension) with the columns the model was\n"
          "trained on",
          {"predict"});
  f.Switch("--probabilities", nullptr,
           "class probabilities (softmax of the logits, HF's pipeline with top_k=None)\n"
           "instead of logits",
           {"predict"});
  f.Value("--output", "FILE|-", nullptr, "- (stdout)",
          "where the predictions go ('-': stdout). A FIFO or a device such as\n"
          "/dev/null is written in place; a file is replaced atomically (renamed over)",
          {"predict"});
  f.Value("--max-len", "N", nullptr, "the length the model was trained with",
          "tokens per row, [CLS] and [SEP] included (>= 2); the default is\n"
          "tokenizer_config.json's model_max_length (128 when it has none)",
          {"predict"});
  f.Value("--tokenizer-compat", "slow|fast", nullptr, "what the model records",
          "the HF tokenizer to reproduce (model.tokenizer_compat): slow = BertTokenizer,\n"
          "fast = BertTokenizerFast; the default is tokenizer_config.json's\n"
          "ringmaster_tokenizer_compat (slow when it has none)",
          {"predict"});
  f.Value("--tokenizer-compat", "slow|fast", nullptr, "slow",
          "the HF tokenizer to reproduce: slow = BertTokenizer, fast = BertTokenizerFast",
          {"tokenize"});
  f.Value("--vocab", "FILE", nullptr, "required", "a WordPiece vocab.txt", {"tokenize"});
  f.Value("--max-len", "N", nullptr, "512", "tokens per line, [CLS] and [SEP] included (>= 2)",
          {"tokenize"});
  f.Switch("--cased", nullptr, "keep case and accents (default: lower-case, strip accents)",
           {"tokenize"});
  f.Value("--out", "DIR", nullptr, "required", "where train.tsv, dev.tsv and vocab.txt go",
          {"gen-data"});
  f.Value("--train", "N", nullptr, "8000", "training rows", {"gen-data"});
  f.Value("--dev", "N", nullptr, "1000", "evaluation rows", {"gen-data"});
  f.Value("--seed", "S", nullptr, "42", "the generator's seed", {"gen-data"});
  f.Value("--seconds", "S", nullptr, "1.5", "measure for at least S seconds, in (0, 600]",
          {"probe"});
}

absl::StatusOr<int> IntFlag(const Args& a, const std::string& name, int def, int min) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return def;
  int v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected an integer >= ", min, ", got '", it->second, "'"));
  }
  return v;
}

// Set when `train` fails because the job itself is wrong: it then exits kExitBadJob.
bool g_bad_job = false;

// Marks errors that restarting cannot fix.
absl::Status BadJob(absl::Status s) {
  if (!s.ok()) g_bad_job = true;
  return s;
}
template <typename T>
absl::StatusOr<T> BadJob(absl::Status s) {
  return BadJob(std::move(s));
}
template <typename T>
absl::StatusOr<T> BadJob(absl::StatusOr<T> s) {
  if (!s.ok()) g_bad_job = true;
  return s;
}

// What this binary and machine offer a rank: the CUDA engine's probe when linked, NCCL.
rt::RankHost ThisHost() {
  rt::RankHost host;
#if RINGMASTER_HAVE_CUDA_ENGINE
  host.probe_gpu = &rt::cuda::ProbeGpu;
#endif
  host.nccl_built = kNcclBuilt;
  return host;
}

// The CUDA engine's factory, where this binary has it (CUDA builds and the emulator build).
rt::CudaEngineFactory CudaEngineFactory(const rt::TrainerEnv& trainer_env) {
#if RINGMASTER_HAVE_CUDA_ENGINE
  return rt::cuda::MakeCudaEngineFactory(trainer_env.cuda_visible_devices);
#else
  (void)trainer_env;
  return nullptr;
#endif
}

// The trainer's own variables (RINGMASTER_ALLOWED_ROOT, ...), read once; the allowed root
// confines every file the process reads or writes from here on.
absl::StatusOr<rt::TrainerEnv> ReadTrainerEnv() {
  RM_ASSIGN_OR_RETURN(rt::TrainerEnv env, rt::ParseTrainerEnv(rt::ProcessEnv()));
  ringmaster::SetAllowedRoot(env.allowed_root);
  return env;
}

absl::Status Train(const Args& a) {
  RM_ASSIGN_OR_RETURN(const rt::TrainerEnv trainer_env, BadJob(ReadTrainerEnv()));
  rt::JobSpec job;
  auto cfg = a.values.find("--config");
  if (cfg != a.values.end()) {
    absl::StatusOr<rt::JobSpec> loaded = rt::LoadJobSpec(cfg->second);
    RM_RETURN_IF_ERROR(BadJob(loaded.status()));
    RM_RETURN_IF_ERROR(BadJob(ringmaster::jobspec::CheckInitFromDirectory(*loaded)));
    job = *std::move(loaded);
  } else {
    // The embedded demo: generate its data once, then train on it.
    RM_ASSIGN_OR_RETURN(job, rt::ParseJobSpec(rt::DefaultDemoJobYaml(), "<embedded demo job>",
                                              fs::current_path().string()));
    const std::string data_dir = fs::path(job.data.train).parent_path().string();
    if (!fs::exists(job.data.train) || !fs::exists(job.data.eval) || !fs::exists(job.model.vocab)) {
      ringmaster::LogInfo(absl::StrCat("generating the demo dataset in ", data_dir));
      RM_RETURN_IF_ERROR(rt::WriteSentimentDataset(data_dir, 42, 8000, 1000));
    }
  }
  const bool resume =
      std::find(a.switches.begin(), a.switches.end(), "--resume") != a.switches.end();
  const bool overwrite =
      std::find(a.switches.begin(), a.switches.end(), "--overwrite") != a.switches.end();
  if (resume && overwrite) {
    return BadJob(absl::InvalidArgumentError("--resume and --overwrite exclude each other"));
  }
  if (resume) job.train.resume = rt::ResumeMode::kForce;
  if (overwrite) job.train.resume = rt::ResumeMode::kNever;
  rt::RankFlags flags;
  if (auto dev = a.values.find("--device"); dev != a.values.end()) {
    flags.device = ringmaster::jobspec::ParseSetting<rt::Device>(dev->second);
    if (!flags.device) return absl::InvalidArgumentError("--device: expected cpu, cuda or auto");
  }
  // One rank of many when started with the torchrun environment (WORLD_SIZE, RANK, ...).
  RM_ASSIGN_OR_RETURN(rt::DistEnv env, rt::DistEnvFromProcess());
  // The rank's device, precision, backend and codec; one this machine cannot run is the job's
  // fault, refused before any rendezvous (a restart on this node cannot help).
  RM_ASSIGN_OR_RETURN(const rt::RankSettings settings,
                      BadJob(rt::ResolveRankSettings(job, env, trainer_env, flags, ThisHost())));
  for (const std::string& note : settings.notes) ringmaster::LogInfo(note);
  rt::ApplyRankSettings(settings, &job);
  if (env.distributed) {
    ringmaster::SetLogProgramName(absl::StrCat("ringmaster-trainer[rank ", env.rank, "]"));
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // A peer that died closes its sockets: writing to them must become an error we report (naming
  // the lost rank), not a silent death by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  // The rank's live figures: in the file its agent reads (RINGMASTER_STATUS_FILE), otherwise in
  // memory for --metrics-port.
  std::unique_ptr<rt::RankStatus> status;
  if (!trainer_env.status_file.empty()) {
    RM_ASSIGN_OR_RETURN(status, rt::RankStatus::CreateFile(trainer_env.status_file));
  } else {
    status = rt::RankStatus::CreateAnonymous();
  }
  rt::CommChoice comm;
  comm.backend = settings.backend;
  comm.cuda_device = settings.cuda_device;
#if RINGMASTER_HAVE_NCCL
  comm.nccl = &rt::NcclCommunicator::Create;
#endif
  RM_ASSIGN_OR_RETURN(auto dist, rt::DistContext::Create(
                                     env, job.distributed.sharding == rt::Sharding::kHybridShard,
                                     env.collective_timeout, status.get(), comm));
  absl::StatusOr<std::unique_ptr<rt::Trainer>> trainer = [&] {
    // A model too large for this node is the job's fault: one clear line and exit 3, instead
    // of std::terminate (SIGABRT) and a restart into the same allocation.
    try {
      return rt::Trainer::Create(job, settings, dist.get(), CudaEngineFactory(trainer_env));
    } catch (const std::bad_alloc&) {
      return BadJob<std::unique_ptr<rt::Trainer>>(absl::ResourceExhaustedError(absl::StrCat(
          job.source,
          ": out of memory while allocating the model, its gradients and optimizer state "
          "(16 bytes per parameter in fp32 unless sharded): use a smaller model.config, "
          "distributed.sharding full_shard over more ranks, or nodes with more memory")));
    }
  }();
  if (!trainer.ok()) {
    // Missing or malformed files and impossible settings are the job's fault; a lost peer
    // during the first collectives is not.
    const absl::StatusCode c = trainer.status().code();
    if (c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound ||
        c == absl::StatusCode::kFailedPrecondition || c == absl::StatusCode::kDataLoss ||
        c == absl::StatusCode::kUnimplemented) {
      g_bad_job = true;
    }
    return trainer.status();
  }
  // /metrics: --metrics-port, or RINGMASTER_METRICS_PORT + LOCAL_RANK (one port per rank on a
  // node); 0 picks a free port (logged).
  std::optional<int> metrics_port;
  if (a.values.count("--metrics-port")) {
    RM_ASSIGN_OR_RETURN(int p, IntFlag(a, "--metrics-port", 0, 0));
    metrics_port = p;
  } else if (trainer_env.metrics_port) {
    const int p = *trainer_env.metrics_port;
    metrics_port = p == 0 ? 0 : p + env.local_rank;
  }
  std::unique_ptr<rt::MetricsServer> metrics;
  if (metrics_port) {
    // /metrics is plaintext and unauthenticated: loopback unless RINGMASTER_METRICS_HOST names
    // another address and RINGMASTER_METRICS_INSECURE_PUBLIC=1 says so knowingly.
    const std::string& host = trainer_env.metrics_host;
    if (!ringmaster::IsLoopbackHost(host) && !trainer_env.metrics_insecure_public) {
      return BadJob(absl::InvalidArgumentError(absl::StrCat(
          "RINGMASTER_METRICS_HOST=", host,
          ": not a loopback address, and /metrics is served in plaintext without "
          "authentication; unset it (127.0.0.1), or set RINGMASTER_METRICS_INSECURE_PUBLIC=1 to "
          "serve it there anyway")));
    }
    RM_ASSIGN_OR_RETURN(
        metrics,
        rt::ServeRankMetrics(absl::StrCat(host, ":", *metrics_port), status.get(),
                             {{"ringmaster_job", job.name}, {"rank", absl::StrCat(env.rank)}}));
  }
  (*trainer)->set_metrics(status.get());
  g_in_loop.store(true);
  absl::StatusOr<rt::TrainResult> run = (*trainer)->Run(&g_stop);
  // Resuming under changed settings would fail again on every restart.
  if (!run.ok() &&
      (rt::IsSettingsChanged(run.status()) || rt::IsAllCheckpointsDamaged(run.status()) ||
       rt::IsCheckpointOfAnotherModel(run.status()))) {
    g_bad_job = true;
  }
  RM_RETURN_IF_ERROR(run.status());
  const rt::TrainResult& r = *run;
  if (r.interrupted) return absl::AbortedError("interrupted; run again to resume");
  if (env.rank != 0) return absl::OkStatus();
  if (r.already_finished) {
    std::printf(
        "training already finished: step %lld is the last; nothing was trained (to train again "
        "from scratch: --overwrite or train.resume: never)\n",
        static_cast<long long>(r.steps));
    if (r.eval_step > 0) {
      std::printf("dev accuracy %.4f, dev loss %.4f (step %lld, the exported model; from %s)\n",
                  r.eval.accuracy, r.eval.loss, static_cast<long long>(r.eval_step),
                  (fs::path(job.output.dir) / "metrics.jsonl").c_str());
    }
    std::printf("model exported to %s\n", r.export_dir.c_str());
    return absl::OkStatus();
  }
  if (r.early_stopped)
    std::printf("early stopping ended training at step %lld\n", static_cast<long long>(r.steps));
  if (r.eval.examples > 0) {
    // The figure of the exported weights, said so, with the step they are of: the last, or
    // the best evaluation's (train.load_best_model_at_end).
    std::printf("dev accuracy %.4f, dev loss %.4f (%lld rows; step %lld, the exported model%s)\n",
                r.eval.accuracy, r.eval.loss, static_cast<long long>(r.eval.examples),
                static_cast<long long>(r.eval_step),
                r.best_model
                    ? absl::StrCat(": the best evaluation by ",
                                   rt::BestModelMetricName(job.train.metric_for_best_model.empty()
                                                               ? "eval_loss"
                                                               : job.train.metric_for_best_model)
                                       .value_or("?"),
                                   " of ", r.steps, " steps")
                          .c_str()
                    : "");
  }
  std::printf("model exported to %s\n", r.export_dir.c_str());
  return absl::OkStatus();
}

// --tokenizer-compat, parsed; nullopt when not given.
absl::StatusOr<std::optional<rt::TokenizerCompat>> CompatFlag(const Args& a) {
  auto it = a.values.find("--tokenizer-compat");
  if (it == a.values.end()) return std::nullopt;
  absl::StatusOr<rt::TokenizerCompat> v =
      ringmaster::jobspec::ParseSettingOrError<rt::TokenizerCompat>(it->second);
  if (!v.ok())
    return absl::InvalidArgumentError(absl::StrCat("--tokenizer-compat: ", v.status().message()));
  return *v;
}

absl::Status Predict(const Args& a) {
  RM_RETURN_IF_ERROR(ReadTrainerEnv().status());
  if (!a.values.count("--model") || !a.values.count("--input")) {
    return absl::InvalidArgumentError("predict needs --model DIR and --input FILE");
  }
  RM_ASSIGN_OR_RETURN(std::optional<rt::TokenizerCompat> compat, CompatFlag(a));
  RM_ASSIGN_OR_RETURN(rt::LoadedModel m, rt::LoadModelDir(a.values.at("--model"), compat));
  // The length the export recorded (tokenizer_config.json's model_max_length, where
  // transformers truncates too), so that predict sees the rows as training did.
  const int trained_len = m.model_max_length > 0 ? m.model_max_length : 128;
  RM_ASSIGN_OR_RETURN(int max_len, IntFlag(a, "--max-len", trained_len, 2));
  max_len = std::min(max_len, m.config.max_position_embeddings);
  const bool probabilities =
      std::find(a.switches.begin(), a.switches.end(), "--probabilities") != a.switches.end();
  RM_ASSIGN_OR_RETURN(std::string out,
                      rt::PredictFile(m, a.values.at("--input"), max_len, probabilities));
  // '-' (the default) is stdout; a device or FIFO is written in place, a file replaced
  // atomically (issue #33); under an agent's --allowed-root no link is followed.
  auto o = a.values.find("--output");
  return ringmaster::WriteUserOutput(o != a.values.end() ? o->second : "-", out,
                                     ringmaster::AllowedRoot());
}

absl::Status Tokenize(const Args& a) {
  if (!a.values.count("--vocab")) return absl::InvalidArgumentError("tokenize needs --vocab");
  RM_ASSIGN_OR_RETURN(int max_len, IntFlag(a, "--max-len", 512, 2));
  const bool cased = std::find(a.switches.begin(), a.switches.end(), "--cased") != a.switches.end();
  RM_ASSIGN_OR_RETURN(std::optional<rt::TokenizerCompat> compat, CompatFlag(a));
  RM_ASSIGN_OR_RETURN(
      rt::WordPieceTokenizer tok,
      rt::WordPieceTokenizer::FromVocabFile(
          a.values.at("--vocab"),
          {.do_lower_case = !cased, .compat = compat.value_or(rt::TokenizerCompat::kSlow)}));
  std::string line, out;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<int32_t> ids = tok.Encode(line, max_len);
    for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&out, i ? " " : "", ids[i]);
    out += "\n";
    if (out.size() > (1 << 16)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return absl::OkStatus();
}

absl::Status GenData(const Args& a) {
  if (!a.values.count("--out")) return absl::InvalidArgumentError("gen-data needs --out DIR");
  if (a.values.at("--out") == "-") {
    return absl::InvalidArgumentError(
        "gen-data --out -: gen-data writes three files (train.tsv, dev.tsv, vocab.txt) into a "
        "directory; standard output cannot hold them");
  }
  RM_ASSIGN_OR_RETURN(int n_train, IntFlag(a, "--train", 8000, 1));
  RM_ASSIGN_OR_RETURN(int n_dev, IntFlag(a, "--dev", 1000, 1));
  RM_ASSIGN_OR_RETURN(int seed, IntFlag(a, "--seed", 42, 0));
  return rt::WriteSentimentDataset(a.values.at("--out"), static_cast<uint64_t>(seed), n_train,
                                   n_dev);
}

absl::Status Probe(const Args& a) {
  RM_ASSIGN_OR_RETURN(const rt::TrainerEnv trainer_env, ReadTrainerEnv());
  rt::ProbeOptions o;
  o.slowdown = trainer_env.slowdown;
  if (a.values.count("--seconds")) {
    const std::string& v = a.values.at("--seconds");
    if (!absl::SimpleAtod(v, &o.min_seconds) || !(o.min_seconds > 0) || o.min_seconds > 600) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seconds '", v, "': expected a number in (0, 600]"));
    }
  }
  RM_ASSIGN_OR_RETURN(rt::ProbeResult r, rt::ProbeThroughput(o));
  std::printf("%s\n", r.ToJson().c_str());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP waits passive unless the environment says otherwise (may re-exec; omp_wait_default.h).
  rt::cpu::ApplyOmpWaitDefault(argv);
  ringmaster::SetLogProgramName("ringmaster-trainer");
  ringmaster::FlagSet fs("ringmaster-trainer",
                         "trains, evaluates and serves BERT sequence classifiers");
  DefineFlags(fs);
  if (std::optional<int> exit_code = fs.ParseOrExit(argc, argv)) return *exit_code;
  const std::string cmd = fs.command();
  if (!fs.positional().empty()) {
    std::fprintf(stderr, "ringmaster-trainer %s: unexpected argument '%s'\n%s\n", cmd.c_str(),
                 fs.positional()[0].c_str(), fs.UsageHint().c_str());
    return 2;
  }
  Args args;
  for (const char* name :
       {"--config", "--device", "--metrics-port", "--model", "--input", "--output", "--max-len",
        "--tokenizer-compat", "--vocab", "--out", "--train", "--dev", "--seed", "--seconds"}) {
    if (std::optional<std::string> v = fs.value(name)) args.values[name] = *v;
  }
  for (const char* name : {"--resume", "--overwrite", "--cased", "--probabilities"}) {
    if (fs.value(name) == "true") args.switches.push_back(name);
  }
  absl::Status s;
  if (cmd == "train") {
    try {
      s = Train(args);
    } catch (const std::bad_alloc&) {
      // Anywhere else (reading the data, a batch's activations): still one line and exit 3,
      // not SIGABRT. After the first step the coordinator restarts it like any other exit.
      s = BadJob(absl::ResourceExhaustedError(
          "out of memory while running the job: use a smaller micro_batch_size, max_seq_len "
          "or model, or nodes with more memory"));
    }
  } else if (cmd == "predict") {
    s = Predict(args);
  } else if (cmd == "tokenize") {
    s = Tokenize(args);
  } else if (cmd == "gen-data") {
    s = GenData(args);
  } else if (cmd == "probe") {
    s = Probe(args);
  } else if (cmd == "print-default-job") {
    std::fputs(rt::DefaultDemoJobYaml().c_str(), stdout);
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "ringmaster-trainer %s: error: %s\n", cmd.c_str(),
                 std::string(s.message()).c_str());
    if (s.code() == absl::StatusCode::kAborted) return ringmaster::kExitTerminated;
    if (rt::IsDiverged(s)) return ringmaster::kExitDiverged;
    return g_bad_job ? ringmaster::kExitBadJob : 1;
  }
  return 0;
}
