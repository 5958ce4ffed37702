// Fuzzes the job YAML parser (jobspec/job_spec), the same one the coordinator runs on every
// submission. Properties: any input is refused with a Status or parsed into a spec that
// ValidateJobSpec accepts, and JobSpecToYaml writes it as YAML that parses back to a spec
// written out identically.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_check.h"
#include "jobspec/job_spec.h"

namespace rt = ringmaster::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<rt::JobSpec> spec = rt::ParseJobSpec(text, "job.yaml", "/jobs");
  if (!spec.ok()) {
    FUZZ_CHECK(!spec.status().message().empty(), "an error says what is wrong");
    return 0;
  }
  FUZZ_CHECK(rt::ValidateJobSpec(*spec).ok(), "a parsed spec validates");
  const std::string yaml = rt::JobSpecToYaml(*spec);
  absl::StatusOr<rt::JobSpec> again = rt::ParseJobSpec(yaml, "written.yaml", "/elsewhere");
  if (!again.ok()) {
    std::fprintf(stderr, "%s\n---\n%s\n", std::string(again.status().message()).c_str(),
                 yaml.c_str());
  }
  FUZZ_CHECK(again.ok(), "a written spec parses");
  FUZZ_CHECK(rt::JobSpecToYaml(*again) == yaml, "a written spec reads back the same");
  return 0;
}
