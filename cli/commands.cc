#include "cli/commands.h"

#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/job_format.h"
#include "common/file_util.h"
#include "common/log_escape.h"
#include "jobspec/job_spec.h"

namespace ringmaster::cli {
namespace {

void Print(std::FILE* f, const std::string& s) { std::fwrite(s.data(), 1, s.size(), f); }

// Errors carry the coordinator's text, which may quote a job file or a trainer's output: shown
// escaped (common/log_escape.h), never as raw control characters or invalid UTF-8.
int Error(CliIo& io, const absl::Status& s) {
  Print(io.err,
        absl::StrCat("ringmaster: ", EscapeControlCharacters(std::string(s.message())), "\n"));
  return 1;
}

v1::JobStatus WithoutRates(v1::JobStatus s) {
  s.clear_samples_per_second();
  s.clear_eta();
  return s;
}

std::string RandomRequestId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

}  // namespace

absl::StatusOr<std::string> SubmitJobFile(CoordinatorClient& client, const std::string& path,
                                          const std::string& yaml_override, CliIo& io) {
  // The coordinator's limit, said here before anything is sent (jobspec/job_spec.h).
  absl::StatusOr<std::string> text = trainer::ReadJobFile(path);
  if (!text.ok()) return text.status();
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(path, ": ", ec.message()));
  // The request's text fields must be UTF-8 (protobuf `string`): else the coordinator could not
  // even read the request. Said here, naming the file and where (issue #31).
  if (const size_t at = FirstInvalidUtf8(*text); at != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(EscapeControlCharacters(path), ": byte ", at, " (0x",
                     absl::Hex(static_cast<unsigned char>((*text)[at]), absl::kZeroPad2),
                     ") is not valid UTF-8; a job file must be UTF-8 text"));
  }
  if (!IsValidUtf8(abs.string())) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job file's path '", EscapeControlCharacters(abs.string()),
                     "' is not valid UTF-8; the coordinator and the agents need it as text"));
  }
  v1::SubmitJobRequest req;
  req.mutable_client_version()->set_major(1);
  req.mutable_client_version()->set_minor(0);
  req.mutable_client_version()->set_build("ringmaster-cli");
  req.set_job_yaml(yaml_override.empty() ? *text : yaml_override);
  req.set_base_dir(abs.parent_path().string());
  req.set_source(abs.filename().string());
  req.set_request_id(RandomRequestId());
  absl::StatusOr<v1::SubmitJobResponse> resp = client.SubmitJob(req);
  if (!resp.ok()) return resp.status();
  (void)io;
  return resp->job_id();
}

int FollowJob(CoordinatorClient& client, const std::string& job_id, CliIo& io) {
  v1::JobStatus last;
  std::string last_line;
  std::string last_update;
  bool drawn = false;
  auto show = [&](const v1::JobStatus& st) {
    last = st;
    const std::string line = FormatProgressLine(st);
    if (line == last_line) return;
    // Off a terminal a line is written per update (a step, a phase, a failure...): the rate and
    // the ETA alone change with every rank's report and would repeat the step.
    const std::string update = FormatProgressLine(WithoutRates(st));
    if (!io.tty && update == last_update) return;
    last_line = line;
    last_update = update;
    if (io.tty) {
      Print(io.out, absl::StrCat("\r\033[K", line));  // redraw in place
      drawn = true;
    } else {
      Print(io.out, line + "\n");
    }
    std::fflush(io.out);
  };
  // The watch may break when the coordinator restarts: resume it a few times.
  absl::Status s;
  for (int attempt = 0; attempt < 10; ++attempt) {
    s = client.WatchJob(job_id, show, io.interrupted);
    if (s.ok() || s.code() != absl::StatusCode::kUnavailable || io.interrupted()) break;
  }
  if (drawn) Print(io.out, "\n");
  if (!s.ok()) {
    if (io.interrupted()) return 130;
    return Error(io, s);
  }
  if (last.phase() != v1::JOB_PHASE_SUCCEEDED && !last.error().empty()) {
    Print(io.err, absl::StrCat("job ", job_id, " ", PhaseName(last.phase()), ": ",
                               EscapeControlCharacters(last.error()), "\n"));
  }
  return last.phase() == v1::JOB_PHASE_SUCCEEDED ? 0 : 1;
}

int CmdSubmit(CoordinatorClient& client, const std::string& path, bool follow, CliIo& io) {
  absl::StatusOr<std::string> id = SubmitJobFile(client, path, "", io);
  if (!id.ok()) return Error(io, id.status());
  Print(io.out, *id + "\n");
  std::fflush(io.out);
  // A job the cluster cannot place yet is accepted and waits: say so now, not after the timeout.
  absl::StatusOr<v1::JobStatus> st = client.GetJob(*id);
  absl::StatusOr<v1::ListNodesResponse> nodes = client.ListNodes();
  if (st.ok() && nodes.ok()) {
    if (const std::string note = SubmitWaitNote(*st, *nodes); !note.empty()) {
      Print(io.err, absl::StrCat("ringmaster: ", note, "\n"));
    }
  }
  if (!follow) return 0;
  const int rc = FollowJob(client, *id, io);
  if (rc == 130) {
    // Ctrl-C stops the following, not the job.
    Print(io.err, absl::StrCat("ringmaster: stopped following; job ", *id,
                               " keeps running (`ringmaster status ", *id, "`; `ringmaster cancel ",
                               *id, "` stops it)\n"));
  }
  return rc;
}

int CmdStatus(CoordinatorClient& client, const std::string& job_id, CliIo& io) {
  absl::StatusOr<v1::JobStatus> st = client.GetJob(job_id);
  if (!st.ok()) return Error(io, st.status());
  Print(io.out, FormatJobDetails(*st));
  return 0;
}

int CmdList(CoordinatorClient& client, CliIo& io) {
  v1::ListJobsResponse all;
  v1::ListJobsRequest req;
  for (int page = 0; page < 1000; ++page) {
    absl::StatusOr<v1::ListJobsResponse> r = client.ListJobs(req);
    if (!r.ok()) return Error(io, r.status());
    for (v1::JobStatus& j : *r->mutable_jobs()) *all.add_jobs() = std::move(j);
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  Print(io.out, FormatJobsTable(all));
  return 0;
}

int CmdCancel(CoordinatorClient& client, const std::string& job_id, CliIo& io) {
  absl::StatusOr<v1::JobStatus> st = client.CancelJob(job_id, "cancelled from the CLI");
  if (!st.ok()) return Error(io, st.status());
  Print(io.out, absl::StrCat(job_id, ": ", PhaseName(st->phase()), "\n"));
  return 0;
}

int CmdNodes(CoordinatorClient& client, CliIo& io) {
  absl::StatusOr<v1::ListNodesResponse> r = client.ListNodes();
  if (!r.ok()) return Error(io, r.status());
  Print(io.out, FormatNodesTable(*r));
  return 0;
}

int CmdNodesForget(CoordinatorClient& client, const std::string& node_name, CliIo& io) {
  if (absl::Status st = client.ForgetNode(node_name); !st.ok()) return Error(io, st);
  Print(io.out, absl::StrCat("node ", node_name,
                             " forgotten: the next agent to register that name takes it\n"));
  return 0;
}

int CmdLogs(CoordinatorClient& client, const std::string& job_id, int rank, uint32_t max_bytes,
            CliIo& io) {
  v1::GetLogsRequest req;
  req.set_job_id(job_id);
  req.set_rank(static_cast<uint32_t>(rank));
  req.set_max_bytes(max_bytes);
  absl::StatusOr<v1::GetLogsResponse> r = client.GetLogs(req);
  if (!r.ok()) return Error(io, r.status());
  if (r->truncated()) {
    Print(io.err, absl::StrCat("(the last ", r->data().size(), " bytes of rank ", rank,
                               "'s log, generation ", r->generation(), ", node ",
                               EscapeControlCharacters(r->node_id()), ")\n"));
  }
  // The log is the trainer's output, which may echo a job's labels or a model file's bytes:
  // its lines stay lines, anything that would drive the terminal is escaped.
  Print(io.out, EscapeControlCharacters(r->data(), LineBreaks::kKeep));
  return 0;
}

}  // namespace ringmaster::cli
