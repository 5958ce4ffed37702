#include "agent/path_policy.h"

#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/open_beneath.h"

namespace ringmaster::agent {
namespace {

namespace fs = std::filesystem;

// The canonical form of `p` without a trailing separator ("/data/" -> "/data").
absl::StatusOr<fs::path> Canonical(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot resolve: ", ec.message()));
  c = c.lexically_normal();
  if (!c.has_filename() && c.has_relative_path()) c = c.parent_path();
  return c;
}

bool Within(const fs::path& p, const fs::path& root) {
  const fs::path rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

absl::Status CheckPathWithinRoots(const std::string& field, const std::string& path,
                                  const std::vector<std::string>& roots) {
  if (roots.empty()) return absl::OkStatus();
  const std::string joined = absl::StrJoin(roots, ", ");
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, " '", path.substr(0, 1024), "' ", why,
                                                   " (allowed roots: ", joined, ")"));
  };
  if (std::optional<size_t> at = FindControlCharacter(path)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s holds a control character (byte 0x%02x at offset %d); refused", field,
                        static_cast<unsigned char>(path[*at]), *at));
  }
  if (!fs::path(path).is_absolute()) return refuse("is not an absolute path");
  absl::StatusOr<fs::path> p = Canonical(path);
  if (!p.ok()) return refuse(std::string(p.status().message()));
  for (const std::string& r : roots) {
    if (!fs::path(r).is_absolute()) continue;  // the agent makes its roots absolute
    absl::StatusOr<fs::path> root = Canonical(r);
    if (root.ok() && Within(*p, *root)) return absl::OkStatus();
  }
  return refuse(absl::StrCat("resolves to '", p->string(), "', outside the allowed roots"));
}

std::string RootHolding(const std::string& path, const std::vector<std::string>& roots) {
  auto normal = [](const fs::path& x) {
    fs::path n = x.lexically_normal();
    return !n.has_filename() && n.has_relative_path() ? n.parent_path() : n;
  };
  const fs::path p = normal(path);
  for (const std::string& r : roots) {
    if (p == normal(r) || Within(p, normal(r))) return r;
    absl::StatusOr<fs::path> c = Canonical(r);
    if (c.ok() && (p == *c || Within(p, *c))) return c->string();
  }
  return "";
}

// Entries of a model directory CheckJobPaths looks at before refusing the directory.
constexpr size_t kMaxModelEntries = 4096;

absl::Status CheckJobPaths(const trainer::JobSpec& spec, const std::vector<std::string>& roots) {
  if (roots.empty()) return absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> paths = {
      {"model.init_from", spec.model.init_from},
      {"model.vocab", spec.model.vocab},
      {"data.train", spec.data.train},
      {"data.eval", spec.data.eval},
      {"output.dir", spec.output.dir},
      {"output.tensorboard_dir", spec.output.tensorboard_dir}};
  if (!spec.model.init_from.empty()) {
    // A symlink inside the model directory could point anywhere: check every entry the trainer
    // may open (config, weights, vocabulary, tokenizer files, a sentence-transformers folder's
    // modules), to a depth of 3 and at most kMaxModelEntries of them, without following links.
    const fs::path dir(spec.model.init_from);
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
    size_t seen = 0;
    for (; !ec && it != end; it.increment(ec)) {
      if (++seen > kMaxModelEntries) {
        return absl::InvalidArgumentError(
            absl::StrCat("model.init_from: '", spec.model.init_from, "' holds more than ",
                         kMaxModelEntries, " entries; a model directory has a few files"));
      }
      if (it.depth() >= 2) it.disable_recursion_pending();
      paths.emplace_back(
          absl::StrCat("model.init_from/", it->path().lexically_relative(dir).string()),
          it->path().string());
    }
  }
  for (const auto& [field, path] : paths) {
    if (path.empty()) continue;
    if (absl::Status s = CheckPathWithinRoots(field, path, roots); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::agent
