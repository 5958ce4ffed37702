// Checks, on the machine that trains, that model.init_from names a directory there. The usual
// mistake is a Hugging Face hub name (`bert-base-uncased`), which Ringmaster cannot download:
// the error says so and how to make the local directory it needs.
#pragma once

#include "absl/status/status.h"
#include "jobspec/job_spec.h"

namespace ringmaster::jobspec {

// OK without init_from or when it is a directory; otherwise InvalidArgument naming the key,
// the path it resolved to, what the directory must hold and how to save one (save_pretrained).
absl::Status CheckInitFromDirectory(const trainer::JobSpec& spec);

}  // namespace ringmaster::jobspec
