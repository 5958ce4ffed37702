#include "common/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace ringmaster {
namespace {

constexpr int kBarWidth = 20;
// A terminal redraw per step is expensive when steps are fast; 10 redraws a second look live.
constexpr double kInteractiveRedrawSeconds = 0.1;
// Clears from the cursor to the end of the line, so a shorter redraw leaves no leftovers.
constexpr char kClearToEol[] = "\033[K";

}  // namespace

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
  if (h > 0) return absl::StrFormat("%dh%02dm%02ds", h, m, sec);
  if (m > 0) return absl::StrFormat("%dm%02ds", m, sec);
  return absl::StrFormat("%ds", sec);
}

ProgressReporter::Sink ProgressReporter::DefaultSink() {
  return [](std::string_view text) { WriteToStderr(text); };
}

ProgressReporter::ProgressReporter(std::string label, int64_t total_steps, int64_t start_step,
                                   bool interactive, double log_interval_seconds, Clock now_seconds,
                                   Sink sink)
    : label_(std::move(label)),
      total_steps_(total_steps),
      start_step_(start_step),
      interactive_(interactive),
      log_interval_seconds_(log_interval_seconds),
      now_(std::move(now_seconds)),
      sink_(std::move(sink)),
      start_time_(now_()),
      step_(start_step) {}

ProgressReporter::~ProgressReporter() {
  if (bar_open_) sink_("\n");
}

void ProgressReporter::Update(int64_t step, double loss, double lr, int64_t samples_in_step) {
  step_ = step;
  loss_ = loss;
  lr_ = lr;
  samples_ += samples_in_step;
  has_update_ = true;
  shown_ = false;
  double now = now_();
  bool last = total_steps_ > 0 && step >= total_steps_;
  double interval = interactive_ ? kInteractiveRedrawSeconds : log_interval_seconds_;
  if (!drawn_once_ || last || now - last_draw_ >= interval) Draw(now);
}

void ProgressReporter::Draw(double now) {
  if (interactive_) {
    sink_(absl::StrCat("\r", BarLine(now), kClearToEol));
    bar_open_ = true;
  } else {
    sink_(FormatLogLine(LogLevel::kInfo, PlainLine(now)));
  }
  last_draw_ = now;
  drawn_once_ = true;
  shown_ = true;
}

void ProgressReporter::Message(std::string_view msg) {
  if (!interactive_ || !bar_open_) {
    sink_(FormatLogLine(LogLevel::kInfo, msg));
    return;
  }
  // One sink call, so the terminal never shows the bar half-cleared.
  sink_(absl::StrCat("\r", kClearToEol, FormatLogLine(LogLevel::kInfo, msg), BarLine(now_()),
                     kClearToEol));
}

void ProgressReporter::Finish() {
  if (has_update_ && !shown_) Draw(now_());
  if (bar_open_) {
    sink_("\n");
    bar_open_ = false;
  }
}

namespace {

struct Rates {
  double samples_per_second = -1;  // < 0: not known yet
  double eta_seconds = -1;
};

Rates ComputeRates(double elapsed, int64_t samples, int64_t steps_done, int64_t steps_left) {
  Rates r;
  if (elapsed <= 0) return r;
  r.samples_per_second = static_cast<double>(samples) / elapsed;
  if (steps_left <= 0) {
    r.eta_seconds = 0;
  } else if (steps_done > 0) {
    r.eta_seconds = static_cast<double>(steps_left) * elapsed / static_cast<double>(steps_done);
  }
  return r;
}

}  // namespace

std::string ProgressReporter::BarLine(double now) const {
  Rates r = ComputeRates(now - start_time_, samples_, step_ - start_step_, total_steps_ - step_);
  std::string line = label_.empty() ? "" : absl::StrCat(label_, " ");
  if (total_steps_ > 0) {
    int64_t clamped = std::clamp<int64_t>(step_, 0, total_steps_);
    int filled = static_cast<int>(clamped * kBarWidth / total_steps_);
    std::string total = absl::StrCat(total_steps_);
    absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(kBarWidth - filled, '.'),
                    "]  ", absl::StrFormat("%*d", static_cast<int>(total.size()), step_), "/",
                    total);
  } else {
    absl::StrAppend(&line, "step ", step_);
  }
  absl::StrAppend(&line, absl::StrFormat("  loss %.4f  lr %.3g", loss_, lr_));
  if (r.samples_per_second >= 0) {
    absl::StrAppend(&line, absl::StrFormat("  %.1f samples/s", r.samples_per_second));
  }
  if (total_steps_ > 0) absl::StrAppend(&line, "  ETA ", FormatDuration(r.eta_seconds));
  return line;
}

std::string ProgressReporter::PlainLine(double now) const {
  Rates r = ComputeRates(now - start_time_, samples_, step_ - start_step_, total_steps_ - step_);
  std::string line = label_.empty() ? "" : absl::StrCat(label_, " ");
  absl::StrAppend(&line, "step ", step_);
  if (total_steps_ > 0) absl::StrAppend(&line, "/", total_steps_);
  absl::StrAppend(&line, absl::StrFormat(" loss=%.4f lr=%.3g", loss_, lr_));
  if (r.samples_per_second >= 0) {
    absl::StrAppend(&line, absl::StrFormat(" samples/s=%.1f", r.samples_per_second));
  }
  if (total_steps_ > 0) absl::StrAppend(&line, " eta=", FormatDuration(r.eta_seconds));
  return line;
}

}  // namespace ringmaster
