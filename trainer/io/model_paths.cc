#include "trainer/io/model_paths.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/open_beneath.h"

namespace ringmaster::trainer {

namespace fs = std::filesystem;

namespace {

// `s` for an error message: at most 256 bytes, control characters shown as \xNN.
std::string Shown(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 256; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > 256) out += "...";
  return out;
}

bool Within(const fs::path& p, const fs::path& root) {
  if (p == root) return true;
  const fs::path rel = p.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

absl::Status CheckModelEntry(const std::string& entry, const std::string& named_by) {
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(named_by, " is '", Shown(entry), "': ", why,
                     "; a model directory's files may name only paths inside it"));
  };
  if (std::optional<size_t> at = FindControlCharacter(entry)) {
    return refuse(absl::StrCat("a control character at offset ", *at));
  }
  const fs::path p(entry);
  if (p.is_absolute()) return refuse("an absolute path");
  for (const fs::path& part : p) {
    if (part == "..") return refuse("it has a '..' component");
  }
  return absl::OkStatus();
}

absl::Status CheckModelPathBeneathRoot(const std::string& path, const std::string& named_by) {
  const std::string env = AllowedRoot();
  if (env.empty()) return absl::OkStatus();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return absl::OkStatus();
  const std::string by = named_by.empty() ? "" : absl::StrCat(" (named by ", named_by, ")");
  const fs::path root = fs::weakly_canonical(env, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("RINGMASTER_ALLOWED_ROOT '", Shown(env), "': ", ec.message()));
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec) {
    // A dangling link, a loop, or a folder on the way that cannot be searched.
    return absl::InvalidArgumentError(absl::StrCat(Shown(path), by,
                                                   ": cannot be resolved: ", ec.message(),
                                                   " (allowed root: ", root.string(), ")"));
  }
  if (!Within(real, root)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Shown(path), by, " resolves to '", Shown(real.string()), "', outside the allowed root ",
        root.string(), "; a model is read only from inside it"));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
