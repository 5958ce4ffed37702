// Fuzzes the SST-2 TSV reader (trainer/data/tsv). The first byte picks the mode (prediction
// input, regression, or 2..5 classes), the rest is the file. Properties: any input is refused
// with a Status naming "<source>:<line>:" or read into examples whose labels obey the mode and
// whose sentences hold no tab or newline.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "fuzz/fuzz_check.h"
#include "trainer/data/tsv.h"

namespace rt = ringmaster::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 6;  // 0: predict, 1: regression, else classes
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<std::vector<rt::Example>> examples =
      mode == 0 ? rt::ParseTsvForPredict(text, "fuzz.tsv") : rt::ParseTsv(text, "fuzz.tsv", mode);
  if (!examples.ok()) {
    FUZZ_CHECK(absl::StartsWith(examples.status().message(), "fuzz.tsv:"),
               "errors name the source");
    return 0;
  }
  FUZZ_CHECK(!examples->empty(), "at least one example");
  for (const rt::Example& e : *examples) {
    FUZZ_CHECK(e.sentence.find_first_of("\t\n") == std::string::npos, "one field per sentence");
    FUZZ_CHECK(std::isfinite(e.label), "labels are finite");
    if (mode >= 2) {
      FUZZ_CHECK(e.label >= 0 && e.label < mode && e.label == std::floor(e.label),
                 "class labels are ids in [0, num_labels)");
    }
  }
  return 0;
}
