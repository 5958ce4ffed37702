// Helpers shared by the job spec parser's tests: a minimal valid job and the parse/error calls.
#pragma once

#include <string>

#include "gtest/gtest.h"
#include "jobspec/job_spec.h"

namespace ringmaster::trainer::testing_util {

// Six lines; tests append sections, so an appended line k is line 6 + k of the file.
inline constexpr char kMinimal[] = R"(model:
  init_from: models/bert
data:
  train: train.tsv
output:
  dir: out
)";

inline constexpr char kFromScratch[] = R"(model:
  config:
    hidden_size: 64
    num_hidden_layers: 2
    num_attention_heads: 4
    intermediate_size: 128
    max_position_embeddings: 64
  vocab: vocab.txt
  num_labels: 3
data:
  train: t.tsv
  max_seq_len: 32
output:
  dir: o
)";

inline absl::StatusOr<JobSpec> Parse(const std::string& yaml) {
  return ParseJobSpec(yaml, "job.yaml", "");
}

// The error text of a spec that must fail.
inline std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = Parse(yaml);
  if (spec.ok()) {
    ADD_FAILURE() << "parsed but should not have:\n" << yaml;
    return "";
  }
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

}  // namespace ringmaster::trainer::testing_util
