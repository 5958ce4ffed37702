// Training progress for people: a redrawn bar on a terminal, rate-limited log lines otherwise.
//
// On a terminal (the caller passes isatty(2)) one line is redrawn in place with "\r":
//   train [######..............]  120/1000  loss 0.4312  lr 1.9e-05  38.2 samples/s  ETA 1m23s
// Elsewhere (files, pipes, kubectl logs) a redrawn line is noise, so plain log lines are printed
// at most every `log_interval_seconds`, plus the first and last step:
//   ... INFO ringmaster-trainer: train step 120/1000 loss=0.4312 lr=1.9e-05 samples/s=38.2
//   eta=1m23s
// samples/s is the average since construction (i.e. since `start_step`, which is not 0 after a
// resume), so a resumed run does not count restored steps as instant progress. The ETA is the
// rate over a moving window of the last kEtaWindowSteps updates (the first step's start-up costs
// fall out of it), and reads "warming up" until that window spans kEtaWarmupSteps steps.
// With SetLogEverySteps(N) (train.log_every_steps, HF's logging_steps) a log line is printed at
// every step that is a multiple of N, its loss the mean over those N steps, instead of every few
// seconds.
//
// Not thread safe: one training loop owns a reporter.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>

namespace ringmaster {

// Seconds on a monotonic clock (steady_clock); the reporter's default clock.
double MonotonicSeconds();

// "45s", "1m23s", "1h02m05s"; negative or non-finite input gives "?".
std::string FormatDuration(double seconds);

class ProgressReporter {
 public:
  using Clock = std::function<double()>;
  using Sink = std::function<void(std::string_view)>;

  // `label` prefixes every line when not empty. `total_steps` <= 0 means unknown: no bar and no
  // ETA. Output goes to `sink` (default: stderr, one write per call); tests inject a clock and a
  // sink.
  ProgressReporter(std::string label, int64_t total_steps, int64_t start_step, bool interactive,
                   double log_interval_seconds = 10.0, Clock now_seconds = MonotonicSeconds,
                   Sink sink = DefaultSink());
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  // Ends an open bar line so that whatever is printed next starts on a fresh line.
  ~ProgressReporter();

  static constexpr size_t kEtaWindowSteps = 30;
  static constexpr int64_t kEtaWarmupSteps = 3;

  // Records that optimizer step `step` (1-based count of completed steps) finished with `loss`
  // at learning rate `lr`, having consumed `samples_in_step` samples (whole job); `epoch` (< 0:
  // not shown) is the fractional epoch reached, as HF logs it (0.67 = two thirds of epoch one).
  void Update(int64_t step, double loss, double lr, int64_t samples_in_step, double epoch = -1);

  // Log lines every `steps` steps (0: every log_interval_seconds, the default).
  void SetLogEverySteps(int64_t steps) { log_every_steps_ = steps; }

  // Prints `msg` as a log line without corrupting the bar: clears it, prints, redraws it.
  void Message(std::string_view msg);

  // Shows the latest state if it has not been shown yet and ends the bar line with "\n".
  // Idempotent; Update after Finish starts a new line.
  void Finish();

  static Sink DefaultSink();

 private:
  struct Rates {
    double samples_per_second = -1;  // < 0: not known yet
    double eta_seconds = -1;         // < 0: still warming up
  };
  Rates RatesAt(double now) const;
  std::string BarLine(double now) const;
  std::string PlainLine(double now) const;
  void Draw(double now);

  std::string label_;
  int64_t total_steps_;
  int64_t start_step_;
  bool interactive_;
  double log_interval_seconds_;
  Clock now_;
  Sink sink_;

  double start_time_;
  int64_t step_ = 0;
  double loss_ = 0;
  double lr_ = 0;
  int64_t samples_ = 0;  // since construction
  bool has_update_ = false;
  bool shown_ = true;      // the latest Update has been drawn / logged
  bool bar_open_ = false;  // a bar is on screen without its ending "\n"
  double last_draw_ = 0;
  bool drawn_once_ = false;
  double epoch_ = -1;
  int64_t log_every_steps_ = 0;
  double window_loss_sum_ = 0;  // losses since the last log_every_steps line
  int64_t window_losses_ = 0;
  struct Tick {
    double time;
    int64_t step;
  };
  std::deque<Tick> eta_window_;  // the last kEtaWindowSteps + 1 updates
};

}  // namespace ringmaster
