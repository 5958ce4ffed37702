// A TensorBoard events file for a run's scalars (tensorboard_events.h has the format).
//
// Records are buffered and written at Flush(), which the training loop calls after each step's
// scalars, so a TensorBoard reading the directory live sees every step as it ends. TensorBoard
// is a side channel: a write that fails is logged once as a warning and the writer then drops
// everything; nothing here ever fails training.
//
// Not thread-safe: one thread (rank 0's training loop) writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/train/tensorboard_events.h"

namespace ringmaster::trainer {

// Where the writer's bytes go: the events file, or a fake in tests.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Writes all of `data` (appending), or fails.
  virtual absl::Status Write(std::string_view data) = 0;
};

// "events.out.tfevents.<unix seconds>.<host>", the name TensorBoard's readers look for (they
// match "tfevents" in it). `host` characters other than letters, digits, '-', '_' and '.' become
// '_' (the name stays one path component).
std::string EventsFileName(int64_t unix_seconds, std::string_view host);

// The seconds to name a new events file in a directory holding `existing` names: `now`, or one
// past the newest events file already there when that is not older. TensorBoard reads a
// directory's files in name order and a resumed run's file must come after the run it resumes,
// even when it starts within the same second (or on a host whose clock is behind).
int64_t NextEventsFileSeconds(int64_t now, const std::vector<std::string>& existing);

class TensorBoardWriter {
 public:
  // Writes the file_version record into the buffer; `path` names the file in the warning.
  TensorBoardWriter(std::unique_ptr<ByteSink> sink, std::string path, double wall_time);

  // Creates `dir` (and its parents) and a new events file in it, named as above for `wall_time`
  // and `host`. Below a non-empty `root` every component is opened following no link
  // (open_beneath.h): `dir` must lie below it. An existing file is never overwritten.
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Create(const std::string& root,
                                                                   const std::string& dir,
                                                                   double wall_time,
                                                                   std::string_view host);

  // One Event at `step` holding `values`; an empty list writes nothing.
  void AddScalars(int64_t step, double wall_time, const std::vector<ScalarValue>& values);
  // SessionLog START at `step`: TensorBoard drops what earlier files hold at steps >= `step`.
  void AddSessionStart(int64_t step, double wall_time);
  // Writes the buffered records. The first failure is logged as a warning naming the file; from
  // then on nothing is buffered or written.
  void Flush();

  const std::string& path() const { return path_; }
  bool failed() const { return failed_; }

 private:
  void Add(std::string_view event);

  std::unique_ptr<ByteSink> sink_;
  std::string path_;
  std::string buffer_;  // framed records not yet written
  bool failed_ = false;
};

}  // namespace ringmaster::trainer
