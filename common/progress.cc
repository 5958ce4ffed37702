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

void ProgressReporter::Update(int64_t step, double loss, double lr, int64_t samples_in_step,
                              double epoch) {
  step_ = step;
  loss_ = loss;
  lr_ = lr;
  epoch_ = epoch;
  samples_ += samples_in_step;
  has_update_ = true;
  shown_ = false;
  double now = now_();
  eta_window_.push_back({now, step});
  while (eta_window_.size() > kEtaWindowSteps + 1) eta_window_.pop_front();
  if (log_every_steps_ > 0) {
    window_loss_sum_ += loss;
    ++window_losses_;
    const bool log_now = step % log_every_steps_ == 0;
    if (log_now) {
      // HF's logging_steps: the loss logged is the mean over the steps since the last log.
      loss_ = window_loss_sum_ / static_cast<double>(window_losses_);
      window_loss_sum_ = 0;
      window_losses_ = 0;
      if (interactive_) {
        Message(PlainLine(now));
      } else {
        Draw(now);
      }
      loss_ = loss;
    }
    if (!interactive_) {
      shown_ = true;  // off a terminal, lines come only every log_every_steps steps
      return;
    }
  }
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

ProgressReporter::Rates ProgressReporter::RatesAt(double now) const {
  Rates r;
  const double elapsed = now - start_time_;
  if (elapsed > 0) r.samples_per_second = static_cast<double>(samples_) / elapsed;
  const int64_t steps_left = total_steps_ - step_;
  if (steps_left <= 0) {
    r.eta_seconds = 0;
  } else if (eta_window_.size() >= 2) {
    const double seconds = eta_window_.back().time - eta_window_.front().time;
    const int64_t steps = eta_window_.back().step - eta_window_.front().step;
    if (steps >= kEtaWarmupSteps && seconds > 0) {
      r.eta_seconds = static_cast<double>(steps_left) * seconds / static_cast<double>(steps);
    }
  }
  return r;
}

std::string ProgressReporter::BarLine(double now) const {
  Rates r = RatesAt(now);
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
  if (total_steps_ > 0) {
    absl::StrAppend(&line, "  ETA ",
                    r.eta_seconds < 0 ? "warming up" : FormatDuration(r.eta_seconds));
  }
  return line;
}

std::string ProgressReporter::PlainLine(double now) const {
  Rates r = RatesAt(now);
  std::string line = label_.empty() ? "" : absl::StrCat(label_, " ");
  absl::StrAppend(&line, "step ", step_);
  if (total_steps_ > 0) absl::StrAppend(&line, "/", total_steps_);
  absl::StrAppend(&line, absl::StrFormat(" loss=%.4f lr=%.3g", loss_, lr_));
  if (epoch_ >= 0) absl::StrAppend(&line, absl::StrFormat(" epoch=%.2f", epoch_));
  if (r.samples_per_second >= 0) {
    absl::StrAppend(&line, absl::StrFormat(" samples/s=%.1f", r.samples_per_second));
  }
  if (total_steps_ > 0) {
    absl::StrAppend(&line,
                    " eta=", r.eta_seconds < 0 ? "warming-up" : FormatDuration(r.eta_seconds));
  }
  return line;
}

}  // namespace ringmaster
