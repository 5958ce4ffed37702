#include "trainer/comm/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/store.h"

namespace ringmaster::trainer {
namespace {

// Polling starts fast (rendezvous peers usually arrive within milliseconds of each other) and
// backs off so that a long wait does not spin on the filesystem.
constexpr absl::Duration kMinPoll = absl::Milliseconds(1);
constexpr absl::Duration kMaxPoll = absl::Milliseconds(50);

// Longest escaped key kept verbatim; longer ones are truncated and suffixed with a hash so the
// name stays under NAME_MAX (255) with room for WriteFileAtomic's ".tmp.<pid>" suffix.
constexpr size_t kMaxVerbatimName = 180;

uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string MissingKeys(const std::vector<std::string>& keys) {
  return absl::StrJoin(keys, ", ", [](std::string* out, const std::string& k) {
    absl::StrAppend(out, "'", k, "'");
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FileStore

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Create(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("FileStore: empty directory path");
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  return std::unique_ptr<FileStore>(new FileStore(dir));
}

std::string FileStore::FileNameForKey(const std::string& key) {
  // Only [A-Za-z0-9_-] pass through; everything else (including '.', '/' and '%') becomes %XX.
  // Escaping '.' keeps key files disjoint from WriteFileAtomic's "*.tmp.<pid>" temporaries and
  // from "." / "..".
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string name = "k_";
  for (unsigned char c : key) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      name.push_back(static_cast<char>(c));
    } else {
      name.push_back('%');
      name.push_back(kHex[c >> 4]);
      name.push_back(kHex[c & 0xF]);
    }
  }
  if (name.size() > kMaxVerbatimName) {
    static constexpr int kHashHex = 16;
    uint64_t h = Fnv1a64(key);
    std::string suffix = "~";
    for (int i = kHashHex - 1; i >= 0; --i) suffix.push_back(kHex[(h >> (4 * i)) & 0xF]);
    name.resize(kMaxVerbatimName - suffix.size());
    name += suffix;
  }
  return name;
}

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  absl::Status s = WriteFileAtomic(absl::StrCat(dir_, "/", FileNameForKey(key)), value);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("FileStore ", dir_, ": cannot set key '", key,
                                               "': ", std::string(s.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::TryRead(const std::string& key) const {
  std::string path = absl::StrCat(dir_, "/", FileNameForKey(key));
  // Keys are only ever renamed into place and never removed, so "absent now" is the one
  // expected failure; anything else (permissions, I/O) is reported immediately.
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("key '", key, "' not set"));
    return ErrnoError("cannot access", path);
  }
  return ReadFile(path);
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration poll = kMinPoll;
  while (true) {
    absl::StatusOr<std::string> v = TryRead(key);
    if (v.ok() || !absl::IsNotFound(v.status())) return v;
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "FileStore ", dir_, ": key '", key, "' not set within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(poll, deadline - now));
    poll = std::min(poll * 2, kMaxPoll);
  }
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration poll = kMinPoll;
  std::vector<std::string> missing = keys;
  while (true) {
    std::vector<std::string> still;
    for (const std::string& k : missing) {
      absl::StatusOr<std::string> v = TryRead(k);
      if (v.ok()) continue;
      if (!absl::IsNotFound(v.status())) return v.status();
      still.push_back(k);
    }
    missing = std::move(still);
    if (missing.empty()) return absl::OkStatus();
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("FileStore ", dir_, ": keys ",
                                                      MissingKeys(missing), " not set within ",
                                                      absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(poll, deadline - now));
    poll = std::min(poll * 2, kMaxPoll);
  }
}

// ---------------------------------------------------------------------------------------------
// FakeStore

absl::Status FakeStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> FakeStore::Get(const std::string& key, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool found =
      cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return values_.contains(key); });
  if (!found) {
    return absl::DeadlineExceededError(
        absl::StrCat("FakeStore: key '", key, "' not set within ", absl::FormatDuration(timeout)));
  }
  return values_.at(key);
}

absl::Status FakeStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return values_.contains(k); });
  };
  if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), all_present)) {
    std::vector<std::string> missing;
    for (const std::string& k : keys) {
      if (!values_.contains(k)) missing.push_back(k);
    }
    return absl::DeadlineExceededError(absl::StrCat("FakeStore: keys ", MissingKeys(missing),
                                                    " not set within ",
                                                    absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// PrefixStore

absl::Status PrefixStore::Set(const std::string& key, const std::string& value) {
  return base_.Set(prefix_ + key, value);
}

absl::StatusOr<std::string> PrefixStore::Get(const std::string& key, absl::Duration timeout) {
  return base_.Get(prefix_ + key, timeout);
}

absl::Status PrefixStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& k : keys) prefixed.push_back(prefix_ + k);
  return base_.Wait(prefixed, timeout);
}

// ---------------------------------------------------------------------------------------------
// Gloo adapter

namespace {

class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(ringmaster::trainer::Store& store, absl::Duration timeout)
      : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(key, std::string(data.begin(), data.end())));
  }

  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = store_.Get(key, timeout_);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }

  void wait(const std::vector<std::string>& keys) override { Check(store_.Wait(keys, timeout_)); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Check(store_.Wait(keys, absl::FromChrono(timeout)));
  }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw gloo::IoException(std::string(s.ToString()));
  }

  ringmaster::trainer::Store& store_;
  absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<gloo::rendezvous::Store> MakeGlooStore(Store& store, absl::Duration timeout) {
  return std::make_unique<GlooStoreAdapter>(store, timeout);
}

}  // namespace ringmaster::trainer
