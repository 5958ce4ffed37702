// The coordinator's key-value store for the ranks of one generation (kv.proto): rank 0 publishes
// the NCCL unique id or Gloo addresses, the others wait for them.
//
// Keys are scoped by (job, generation) and only the job's current generation is served: the
// owner (Cluster) announces it with SetGeneration, which drops older generations' keys and makes
// their waiters fail, and EndJob when the job ended. Anything else is FailedPrecondition, so
// ranks of a dead generation never meet the new one's keys. Get and Wait block up to `timeout`,
// then fail with DeadlineExceeded naming the missing keys.
//
// In memory only: after a coordinator restart every job runs a new generation anyway.
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringmaster::coordinator {

inline constexpr size_t kMaxKvKeyBytes = 1024;
inline constexpr size_t kMaxKvValueBytes = size_t{1} << 20;

class KvStore {
 public:
  void SetGeneration(const std::string& job_id, int64_t generation);
  void EndJob(const std::string& job_id);

  absl::Status Set(const std::string& job_id, int64_t generation, const std::string& key,
                   std::string value);
  // timeout <= 0: no waiting (NotFound when absent).
  absl::StatusOr<std::string> Get(const std::string& job_id, int64_t generation,
                                  const std::string& key, absl::Duration timeout);
  absl::Status Wait(const std::string& job_id, int64_t generation,
                    const std::vector<std::string>& keys, absl::Duration timeout);

 private:
  struct Scope {
    int64_t generation = 0;
    bool ended = false;
    absl::flat_hash_map<std::string, std::string> values;
  };
  // OK when (job, generation) is the job's live scope.
  absl::Status CheckScope(const std::string& job_id, int64_t generation) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Scope> scopes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::coordinator
