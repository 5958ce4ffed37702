#include "jobspec/yaml_limits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec_test_util.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;
using testing_util::ErrorOf;
using testing_util::Parse;

// A valid job whose data section continues on line 5.
constexpr char kJob[] =
    "model:\n  init_from: models/bert\noutput:\n  dir: out\ndata:\n"
    "  train: train.tsv\n";

// The labels list of issue #31, finding 3: one 200 KB anchored string and `aliases` aliases.
std::string AliasBomb(int aliases, size_t bytes = 200 * 1024) {
  std::string y = absl::StrCat(kJob, "  labels: [&a \"", std::string(bytes, 'x'), "\"");
  for (int i = 0; i < aliases; ++i) y += ", *a";
  return y + "]\n";
}

TEST(YamlLimits, AliasAmplificationIsRefusedNamingTheLine) {
  // 1,000 aliases of 200 KB: ~200 MB once expanded (812 MB of coordinator RSS before the fix).
  const std::string err = ErrorOf(AliasBomb(1000));
  EXPECT_THAT(err, HasSubstr("job.yaml:7:"));
  EXPECT_THAT(err, HasSubstr("YAML aliases expand the job spec to more than 4194304 bytes"));
}

TEST(YamlLimits, NestedLaughsAreRefused) {
  // Each level doubles: 2^30 scalars from a few hundred bytes.
  std::string y = absl::StrCat(kJob, "x0: &l0 [\"lol\", \"lol\"]\n");
  for (int i = 1; i <= 30; ++i) {
    absl::StrAppend(&y, "x", i, ": &l", i, " [*l", i - 1, ", *l", i - 1, "]\n");
  }
  std::optional<YamlExpansionOverLimit> over = FindYamlExpansionOverLimit(y);
  ASSERT_TRUE(over.has_value());
  EXPECT_GT(over->expanded, kMaxYamlExpandedBytes);
  EXPECT_THAT(ErrorOf(y), HasSubstr("YAML aliases expand the job spec"));
}

TEST(YamlLimits, OrdinaryAliasesAndLargeFilesPass) {
  // A few aliases of small values parse as before.
  absl::StatusOr<JobSpec> spec =
      Parse(absl::StrCat(kJob, "  labels: [&n neg, &p pos]\n  eval: *n\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data.labels.size(), 2u);
  // A file without aliases never reaches the limit, whatever its size up to the 1 MiB cap.
  const std::string big = absl::StrCat("a: \"", std::string(1000 * 1000, 'y'), "\"\n");
  EXPECT_FALSE(FindYamlExpansionOverLimit(big).has_value());
  // Twenty aliases of 200 KB (4 MB) stay under.
  EXPECT_FALSE(FindYamlExpansionOverLimit(AliasBomb(19)).has_value());
  EXPECT_TRUE(FindYamlExpansionOverLimit(AliasBomb(21)).has_value());
}

TEST(YamlLimits, AnAliasOfACollectionCountsItsWholeSize) {
  std::string y = "base: &b {k: \"" + std::string(1000, 'z') + "\"}\nlist: [";
  for (int i = 0; i < 100; ++i) y += "*b, ";
  y += "*b]\n";
  // 101 aliases of ~1 KB each: over a 64 KB limit, under a 1 MB one.
  EXPECT_TRUE(FindYamlExpansionOverLimit(y, 64 * 1024).has_value());
  EXPECT_FALSE(FindYamlExpansionOverLimit(y, 1 << 20).has_value());
}

}  // namespace
}  // namespace ringmaster::trainer
