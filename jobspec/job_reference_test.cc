// ctest-labels: unit
// docs/job-reference.md against the parser: every key the parser accepts (JobSpecKnownKeys, the
// parser's own lookups) has a row, every row names a key the parser accepts, and every default
// written as a literal in `code` parses and is the parser's default.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_spec.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::trainer {
namespace {

struct Row {
  std::string key;
  std::string default_cell;  // as written, trimmed
  int line = 0;
};

// The doc's table rows: "| `key` | type | default | ...", one per key.
std::vector<Row> ReadReferenceRows() {
  const char* src = std::getenv("RINGMASTER_SOURCE_DIR");
  EXPECT_NE(src, nullptr) << "RINGMASTER_SOURCE_DIR is not set (ctest sets it)";
  if (src == nullptr) return {};
  const std::string path = std::string(src) + "/docs/job-reference.md";
  absl::StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  std::vector<Row> rows;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text.value_or(""), '\n')) {
    ++n;
    if (!absl::StartsWith(line, "| `")) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, '|');
    // "", key, type, default, allowed, what, equivalent, ""
    EXPECT_GE(cells.size(), 5u) << path << ":" << n << ": a key row with too few cells";
    if (cells.size() < 5) continue;
    absl::string_view key = absl::StripAsciiWhitespace(cells[1]);
    EXPECT_TRUE(absl::StartsWith(key, "`") && absl::EndsWith(key, "`") && key.size() > 2)
        << path << ":" << n << ": the key cell is not one `key`: " << key;
    key.remove_prefix(1);
    key.remove_suffix(1);
    rows.push_back({std::string(key), std::string(absl::StripAsciiWhitespace(cells[3])), n});
  }
  return rows;
}

// Four required BertConfig fields, the vocab, the training file and the output: the smallest
// spec that parses, so that any other key can be added to it.
constexpr char kBase[] = R"(model:
  config: {hidden_size: 8, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 16}
  vocab: vocab.txt
data: {train: train.tsv}
output: {dir: out}
)";

// kBase with `key` (a dotted path) set to the YAML `value`, parsed and written back.
absl::StatusOr<std::string> WithKey(const std::string& key, const std::string& value) {
  YAML::Node root = YAML::Load(kBase);
  const std::vector<std::string> p = absl::StrSplit(key, '.');
  const YAML::Node v = YAML::Load(value);
  // yaml-cpp's Node assignment writes through instead of rebinding, hence no loop.
  if (p.size() == 1) {
    root[p[0]] = v;
  } else if (p.size() == 2) {
    root[p[0]][p[1]] = v;
  } else if (p.size() == 3) {
    root[p[0]][p[1]][p[2]] = v;
  } else {
    return absl::InvalidArgumentError("key too deep: " + key);
  }
  YAML::Emitter out;
  out << root;
  absl::StatusOr<JobSpec> spec = ParseJobSpec(out.c_str(), "job.yaml", "");
  if (!spec.ok()) return spec.status();
  return JobSpecToYaml(*spec);
}

TEST(JobReferenceTest, TheParsersKeyListIsTheParsers) {
  const std::vector<std::string> known = JobSpecKnownKeys();
  const std::set<std::string> set(known.begin(), known.end());
  EXPECT_EQ(set.size(), known.size());
  for (const char* k :
       {"name", "train", "train.lr", "train.adam_betas", "model.config", "model.config.hidden_size",
        "distributed.skip_zero_blocks", "restart.max_restarts"}) {
    EXPECT_TRUE(set.contains(k)) << k;
  }
  EXPECT_FALSE(set.contains("train.adam_beta1"));  // a hint in the parser, not a key
  // Each one is accepted: a spec naming it does not fail with "unknown key" (its value may be
  // of the wrong type, which is a different error).
  for (const std::string& k : known) {
    absl::StatusOr<std::string> y = WithKey(k, "0");
    if (!y.ok()) {
      EXPECT_THAT(y.status().message(), ::testing::Not(::testing::HasSubstr("unknown"))) << k;
    }
  }
  absl::StatusOr<std::string> typo = WithKey("train.learning_rate", "0.1");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), ::testing::HasSubstr("unknown key 'train.learning_rate'"));
}

TEST(JobReferenceTest, EveryKeyTheParserAcceptsIsDocumentedAndNoOther) {
  const std::vector<Row> rows = ReadReferenceRows();
  ASSERT_FALSE(rows.empty()) << "docs/job-reference.md has no key rows";
  const std::vector<std::string> known = JobSpecKnownKeys();
  const std::set<std::string> known_set(known.begin(), known.end());
  std::map<std::string, int> documented;
  for (const Row& r : rows) {
    EXPECT_TRUE(documented.emplace(r.key, r.line).second)
        << "docs/job-reference.md:" << r.line << ": `" << r.key << "` has a second row";
    EXPECT_TRUE(known_set.contains(r.key))
        << "docs/job-reference.md:" << r.line << ": `" << r.key
        << "` is not a key the parser accepts (jobspec/job_spec.cc)";
  }
  for (const std::string& k : known) {
    EXPECT_TRUE(documented.contains(k))
        << "`" << k << "` is accepted by the parser but has no row in docs/job-reference.md";
  }
}

TEST(JobReferenceTest, EveryLiteralDefaultIsTheParsersDefault) {
  const absl::StatusOr<std::string> base = WithKey("name", "job");  // kBase as written back
  ASSERT_TRUE(base.ok()) << base.status();
  // The comparison sees a changed value.
  const absl::StatusOr<std::string> changed = WithKey("train.lr", "0.5");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_NE(*changed, *base);

  int literal = 0;
  for (const Row& r : ReadReferenceRows()) {
    const absl::string_view d = r.default_cell;
    if (d.size() < 3 || d.front() != '`' || d.back() != '`') continue;  // prose: not checkable
    ++literal;
    const std::string value(d.substr(1, d.size() - 2));
    absl::StatusOr<std::string> y = WithKey(r.key, value);
    ASSERT_TRUE(y.ok()) << "docs/job-reference.md:" << r.line << ": `" << r.key << ": " << value
                        << "` does not parse: " << y.status();
    EXPECT_EQ(*y, *base) << "docs/job-reference.md:" << r.line << ": `" << r.key << ": " << value
                         << "` is not the parser's default";
  }
  EXPECT_GE(literal, 30);  // the checked defaults are most of the keys, not a few
}

}  // namespace
}  // namespace ringmaster::trainer
