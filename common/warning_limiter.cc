#include "common/warning_limiter.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ringmaster {

std::string WarningLimiter::Admit(std::string_view key, std::string_view msg, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(key);
  if (it == windows_.end() && windows_.size() >= max_keys_) {
    // Full: drop the windows that are over and owe no count, else share the overflow window.
    for (auto w = windows_.begin(); w != windows_.end();) {
      w = now - w->second.start >= window_ && w->second.left_out == 0 ? windows_.erase(w)
                                                                      : std::next(w);
    }
    if (windows_.size() >= max_keys_) key = kOverflowKey;
    it = windows_.find(key);
  }
  if (it == windows_.end()) it = windows_.emplace(std::string(key), Window{now}).first;
  Window& w = it->second;
  if (now - w.start >= window_) {
    w.start = now;
    w.written = 0;
  }
  if (w.written >= burst_) {
    ++w.left_out;
    return "";
  }
  ++w.written;
  std::string line(msg);
  if (w.left_out > 0) {
    absl::StrAppend(&line, " (", w.left_out, " similar warning", w.left_out == 1 ? "" : "s",
                    " left out)");
    w.left_out = 0;
  }
  return line;
}

void WarningLimiter::Warn(std::string_view key, std::string_view msg) {
  const std::string line = Admit(key, msg);
  if (!line.empty()) LogWarning(line);
}

}  // namespace ringmaster
