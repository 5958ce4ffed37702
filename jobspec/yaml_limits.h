// YAML aliases counted by the bytes they expand to (issue #31, finding 3). yaml-cpp shares an
// anchored node between its aliases, so Load is cheap, but whoever reads the document copies the
// node once per alias: `labels: [&a "<200 KB>", *a, ...]` with 1,000 aliases (a 204 KB job file)
// took the coordinator from 20 to 812 MB; a 1 MiB file could ask for ~64 GB. Classic "billion
// laughs" nesting is bounded the same way, by bytes rather than by shape.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "yaml-cpp/mark.h"

namespace ringmaster::trainer {

// The most bytes the first document of a job file may expand to, aliases replaced by what they
// name: 4 times the 1 MiB a job file may hold, so any file without aliases fits.
inline constexpr uint64_t kMaxYamlExpandedBytes = uint64_t{4} << 20;

struct YamlExpansionOverLimit {
  YAML::Mark mark;        // the alias (or node) that went over
  uint64_t expanded = 0;  // bytes counted up to and including it
};

// Walks the first document of `text` with yaml-cpp's event parser, counting each scalar by its
// length plus one per node, and each alias by the count of the node it names. Stops at the
// first node that takes the count past `limit` and returns where; nullopt when it stays within.
// Throws YAML::Exception on a syntax error, as YAML::Load does.
std::optional<YamlExpansionOverLimit> FindYamlExpansionOverLimit(
    const std::string& text, uint64_t limit = kMaxYamlExpandedBytes);

}  // namespace ringmaster::trainer
