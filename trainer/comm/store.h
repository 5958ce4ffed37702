// Key-value rendezvous stores: how ranks find each other before any collective exists.
//
// A Store is the out-of-band channel a communicator bootstraps over (Gloo publishes each rank's
// TCP address through it). Keys are write-once in practice; Get blocks until the key appears so
// that ranks starting at different times still meet, but always within a caller-given timeout:
// a rank that never shows up must surface as an error naming the missing key, never as a hang.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace ringmaster::trainer {

class Store {
 public:
  virtual ~Store() = default;

  // Publishes `value` under `key`, replacing any previous value.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // Returns the value of `key`, waiting until it is present. DeadlineExceeded naming the key
  // when it does not appear within `timeout`.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;

  // Waits until every key in `keys` is present. DeadlineExceeded naming the missing keys.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
};

// A store over a directory every rank can see (local disk for single-host runs, a shared
// filesystem otherwise). Each key is one file, written to a temporary name and renamed into
// place so readers never observe a partial value. Key names are escaped so any byte string is a
// safe file name. Get/Wait poll with a bounded exponential backoff: a directory has no portable
// change notification across network filesystems.
class FileStore : public Store {
 public:
  // Creates `dir` (and parents) if needed.
  static absl::StatusOr<std::unique_ptr<FileStore>> Create(const std::string& dir);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  const std::string& dir() const { return dir_; }

  // The file name (within dir()) that holds `key`; exposed for tests.
  static std::string FileNameForKey(const std::string& key);

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  // NotFound when absent; any other error is an I/O failure.
  absl::StatusOr<std::string> TryRead(const std::string& key) const;

  std::string dir_;
};

// An in-process store for unit tests of code that rendezvous through a Store.
class FakeStore : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  absl::flat_hash_map<std::string, std::string> values_;  // Guarded by mu_.
};

// Prepends a fixed prefix to every key, so one store can host several independent rendezvous
// (e.g. a communicator rebuilt after a failure must not read the previous generation's
// addresses).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, Store& base) : prefix_(std::move(prefix)), base_(base) {}

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

 private:
  std::string prefix_;
  Store& base_;
};

// Adapts a Store to Gloo's rendezvous interface. Gloo's interface reports failure by throwing,
// so errors become gloo::IoException carrying the Status text; `timeout` bounds the Gloo calls
// that do not carry their own.
std::unique_ptr<gloo::rendezvous::Store> MakeGlooStore(Store& store, absl::Duration timeout);

}  // namespace ringmaster::trainer
