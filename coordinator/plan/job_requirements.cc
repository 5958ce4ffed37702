// ParseJobRequirements: the trainer's strict parser plus what the coordinator derives.
#include "coordinator/plan/job_requirements.h"

#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "jobspec/model_memory.h"

namespace ringmaster::coordinator {

absl::StatusOr<JobRequirements> ParseJobRequirements(std::string_view yaml, std::string_view source,
                                                     std::string_view base_dir,
                                                     const RendezvousOptions& windows) {
  const std::string_view name = source.empty() ? std::string_view("job.yaml") : source;
  if (yaml.size() > kMaxJobYamlBytes) {
    return trainer::JobFileTooLarge(name, yaml.size());
  }
  if (base_dir.empty() || base_dir.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(name), ": base directory '", ToAbsl(base_dir),
                     "' is not an absolute path (relative paths in the job resolve against it)"));
  }
  absl::StatusOr<trainer::JobSpec> spec = trainer::ParseJobSpec(yaml, name, base_dir);
  if (!spec.ok()) return spec.status();

  JobRequirements r;
  r.spec = *std::move(spec);
  const trainer::DistributedSpec& d = r.spec.distributed;
  r.rendezvous = windows;
  r.rendezvous.min_nodes = d.min_nodes;
  r.rendezvous.max_nodes = d.max_nodes;
  if (absl::Status st = ValidateRendezvousOptions(r.rendezvous); !st.ok()) return st;
  r.max_restarts = r.spec.restart.max_restarts;
  r.plan.procs_per_node = d.procs_per_node;
  r.plan.device = r.spec.train.device;
  r.plan.precision = r.spec.train.precision;
  r.plan.compression = d.compression;
  r.plan.sharding = d.sharding;
  r.plan.backend = d.backend;
  if (r.spec.model.has_config) {
    trainer::BertConfig c = r.spec.model.config;
    // vocab_size 0: from the vocab file, which the trainer reads; counted as 1 (a lower bound).
    if (c.vocab_size == 0) c.vocab_size = 1;
    c.num_labels = r.spec.model.num_labels;
    r.plan.model_parameters = trainer::BertParameterCount(c);
  }
  return r;
}

}  // namespace ringmaster::coordinator
