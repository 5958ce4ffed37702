// The `ringmaster` subcommands that talk to a coordinator, written against CoordinatorClient so
// tests run them with a fake. Each returns the process exit code; messages go to `io`.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "cli/coordinator_client.h"

namespace ringmaster::cli {

struct CliIo {
  std::FILE* out = stdout;
  std::FILE* err = stderr;
  bool tty = false;  // `out` is a terminal: --follow redraws one line
  std::function<bool()> interrupted = [] { return false; };  // Ctrl-C
};

// Reads the job file, submits it (base_dir = the file's absolute directory, request_id random),
// prints the job id. `yaml_override` (non-empty) is sent instead of the file's text.
absl::StatusOr<std::string> SubmitJobFile(CoordinatorClient& client, const std::string& path,
                                          const std::string& yaml_override, CliIo& io);

// Prints a progress line per change until the job ends: 0 when it Succeeded, 1 otherwise (and 130
// when interrupted). The last line stays on screen.
int FollowJob(CoordinatorClient& client, const std::string& job_id, CliIo& io);

int CmdSubmit(CoordinatorClient& client, const std::string& path, bool follow, CliIo& io);
int CmdStatus(CoordinatorClient& client, const std::string& job_id, CliIo& io);
int CmdList(CoordinatorClient& client, CliIo& io);
int CmdCancel(CoordinatorClient& client, const std::string& job_id, CliIo& io);
int CmdNodes(CoordinatorClient& client, CliIo& io);
// Frees the name of a node whose agent is away, so that a new agent may register it (the
// recovery when an agent lost the node secret in its work dir).
int CmdNodesForget(CoordinatorClient& client, const std::string& node_name, CliIo& io);
// There is no RPC for logs: says where each rank's log lies on its node.
// The end of a rank's log (at most max_bytes; 0: the coordinator's default of 64 KiB), fetched
// through the coordinator from the agent that ran it.
int CmdLogs(CoordinatorClient& client, const std::string& job_id, int rank, uint32_t max_bytes,
            CliIo& io);

}  // namespace ringmaster::cli
