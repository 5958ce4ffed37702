// KvStore: generation-scoped keys with blocking reads.
#include "coordinator/kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::coordinator {
namespace {

absl::Status CheckKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("kv: empty key");
  if (key.size() > kMaxKvKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv: key of ", key.size(), " bytes; at most ", kMaxKvKeyBytes));
  }
  return absl::OkStatus();
}

}  // namespace

void KvStore::SetGeneration(const std::string& job_id, int64_t generation) {
  absl::MutexLock lock(&mu_);
  Scope& s = scopes_[job_id];
  if (s.generation == generation && !s.ended) return;
  s.generation = generation;
  s.ended = false;
  s.values.clear();
}

void KvStore::EndJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Scope& s = scopes_[job_id];
  s.ended = true;
  s.values.clear();
}

absl::Status KvStore::CheckScope(const std::string& job_id, int64_t generation) const {
  auto it = scopes_.find(job_id);
  if (it == scopes_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("kv: unknown job ", job_id));
  }
  if (it->second.ended) {
    return absl::FailedPreconditionError(absl::StrCat("kv: job ", job_id, " has ended"));
  }
  if (it->second.generation != generation) {
    return absl::FailedPreconditionError(absl::StrCat("kv: job ", job_id, " is at generation ",
                                                      it->second.generation, ", not ", generation));
  }
  return absl::OkStatus();
}

absl::Status KvStore::Set(const std::string& job_id, int64_t generation, const std::string& key,
                          std::string value) {
  if (absl::Status st = CheckKey(key); !st.ok()) return st;
  if (value.size() > kMaxKvValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("kv: value of ", value.size(), " bytes for key ",
                                                   key, "; at most ", kMaxKvValueBytes));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status st = CheckScope(job_id, generation); !st.ok()) return st;
  scopes_[job_id].values[key] = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvStore::Get(const std::string& job_id, int64_t generation,
                                         const std::string& key, absl::Duration timeout) {
  if (absl::Status st = Wait(job_id, generation, {key}, timeout); !st.ok()) {
    if (timeout <= absl::ZeroDuration() && absl::IsDeadlineExceeded(st)) {
      return absl::NotFoundError(
          absl::StrCat("kv: no key ", key, " in job ", job_id, " generation ", generation));
    }
    return st;
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status st = CheckScope(job_id, generation); !st.ok()) return st;
  const auto& values = scopes_[job_id].values;
  auto it = values.find(key);
  if (it == values.end()) return absl::NotFoundError(absl::StrCat("kv: no key ", key));
  return it->second;
}

absl::Status KvStore::Wait(const std::string& job_id, int64_t generation,
                           const std::vector<std::string>& keys, absl::Duration timeout) {
  for (const std::string& k : keys) {
    if (absl::Status st = CheckKey(k); !st.ok()) return st;
  }
  absl::MutexLock lock(&mu_);
  // Done when every key is there, or the scope is no longer live (which ends the wait with
  // that error).
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!CheckScope(job_id, generation).ok()) return true;
    const auto& values = scopes_.find(job_id)->second.values;
    for (const std::string& k : keys) {
      if (!values.contains(k)) return false;
    }
    return true;
  };
  if (timeout > absl::ZeroDuration()) mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (absl::Status st = CheckScope(job_id, generation); !st.ok()) return st;
  std::vector<std::string> missing;
  const auto& values = scopes_.find(job_id)->second.values;
  for (const std::string& k : keys) {
    if (!values.contains(k)) missing.push_back(k);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("kv: job ", job_id, " generation ", generation, ": still missing after ",
                   absl::FormatDuration(std::max(timeout, absl::ZeroDuration())), ": ",
                   absl::StrJoin(missing, ", ")));
}

}  // namespace ringmaster::coordinator
