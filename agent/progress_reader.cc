#include "agent/progress_reader.h"

#include <sys/stat.h>

#include <fstream>
#include <regex>

#include "nlohmann/json.hpp"

namespace ringmaster::agent {
namespace {

constexpr size_t kTailBytes = 4096;
constexpr size_t kLogHeadBytes = 64 * 1024;

// The last `n` bytes of a file; empty when unreadable.
std::string ReadTail(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return "";
  const std::streamoff size = f.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(n) ? size - n : 0;
  f.seekg(from);
  std::string out(static_cast<size_t>(size - from), '\0');
  f.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

std::string ReadHead(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::string out(n, '\0');
  f.read(out.data(), static_cast<std::streamsize>(n));
  out.resize(static_cast<size_t>(f.gcount()));
  return out;
}

}  // namespace

std::optional<MetricsLine> ParseLastMetricsLine(std::string_view tail) {
  // Walk complete lines from the end (a line being appended has no '\n' yet).
  size_t end = tail.rfind('\n');
  while (end != std::string_view::npos && end > 0) {
    const size_t start = tail.rfind('\n', end - 1);
    const size_t b = start == std::string_view::npos ? 0 : start + 1;
    // The first line of a tail may be cut: accept it only when the tail is the whole file,
    // which parsing tells us (a cut line is not a JSON object).
    nlohmann::json j = nlohmann::json::parse(tail.substr(b, end - b), nullptr, false);
    // Training lines carry a loss; evaluation lines ({"step","eval_loss",...}) do not.
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j.contains("loss") && j["loss"].is_number()) {
      MetricsLine m;
      m.step = j["step"].get<int64_t>();
      m.loss = j["loss"].get<double>();
      return m;
    }
    if (start == std::string_view::npos) break;
    end = start;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseTotalSteps(std::string_view log_text) {
  static const std::regex re(R"(total (\d{1,15}) steps)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(log_text.begin(), log_text.end(), m, re)) return std::nullopt;
  return std::stoll(m[1].str());
}

ProgressReader::ProgressReader(std::string metrics_path, std::string rank0_log_path,
                               int64_t global_batch_size, int64_t max_steps,
                               absl::Time generation_start)
    : metrics_path_(std::move(metrics_path)),
      rank0_log_path_(std::move(rank0_log_path)),
      global_batch_size_(global_batch_size),
      generation_start_(generation_start) {
  last_.total_steps = max_steps > 0 ? max_steps : 0;
}

JobProgress ProgressReader::Update(absl::Time now) {
  if (last_.total_steps == 0 && !rank0_log_path_.empty()) {
    if (std::optional<int64_t> t = ParseTotalSteps(ReadHead(rank0_log_path_, kLogHeadBytes))) {
      last_.total_steps = *t;
    }
  }
  struct stat st {};
  if (::stat(metrics_path_.c_str(), &st) != 0) return last_;
  // Whole seconds: coarse file-system timestamps must not hide a fresh file.
  if (absl::FromUnixSeconds(st.st_mtim.tv_sec + 1) < generation_start_) return last_;
  std::optional<MetricsLine> m = ParseLastMetricsLine(ReadTail(metrics_path_, kTailBytes));
  if (!m) return last_;
  last_.step = m->step;
  last_.loss = m->loss;
  if (!first_seen_) {
    first_seen_ = {m->step, now};
  } else if (now > first_seen_->second && m->step > first_seen_->first) {
    last_.samples_per_second =
        static_cast<double>((m->step - first_seen_->first) * global_batch_size_) /
        absl::ToDoubleSeconds(now - first_seen_->second);
  }
  return last_;
}

}  // namespace ringmaster::agent
