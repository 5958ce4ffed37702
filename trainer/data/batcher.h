// Turning encoded examples into padded batches: the per-epoch order (with length bucketing so
// that dynamic padding wastes little), the batch layout, a background producer that overlaps
// batch building with compute, and parallel encoding of a whole data set.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "trainer/data/tsv.h"

namespace ringmaster::trainer {

struct EncodedExample {
  std::vector<int32_t> ids;  // [CLS] ... [SEP], already truncated, not padded
  float label = 0;
};

// Padded to the longest row in the batch (dynamic padding), not to max_len.
struct Batch {
  int batch_size = 0;
  int seq_len = 0;
  std::vector<int32_t> input_ids;       // [batch_size * seq_len], row-major
  std::vector<float> attention_mask;    // 1 for tokens, 0 for padding
  std::vector<int32_t> token_type_ids;  // all 0 (single-sentence tasks)
  std::vector<float> labels;            // [batch_size]
  std::vector<int64_t> example_index;   // row in the source file, for predict output ordering
};

// Gathers data[indices[i]] into row i. Empty `indices` gives an empty batch (0 x 0).
Batch MakeBatch(const std::vector<EncodedExample>& data, const std::vector<int64_t>& indices,
                int32_t pad_id);

// The order of one epoch as a list of micro-batches of example indices; every example appears
// exactly once. micro_batch_size must be >= 1 (the process aborts otherwise: it is a config
// bug that must not turn into an empty epoch).
//
// shuffle == false: file order, consecutive chunks of micro_batch_size (the last may be short).
// shuffle == true: length-bucketed. A std::mt19937_64 is seeded with
//   SplitMix64(seed ^ SplitMix64(epoch + 0x9E3779B97F4A7C15))
// (SplitMix64 = Steele et al.'s finalizer, as in java.util.SplittableRandom), then:
//   1. all indices are permuted by Fisher-Yates (i from n-1 down to 1, j uniform in [0, i]),
//   2. the permutation is cut into pools of 64 * micro_batch_size,
//   3. each pool is stably sorted by length and cut into micro-batches (only the last pool can
//      leave a short one),
//   4. the micro-batch order is shuffled by Fisher-Yates with the same engine.
// "Uniform in [0, i]" draws 64-bit words and rejects those below 2^64 mod (i+1), then reduces
// mod (i+1); no standard distribution is used, so plans are identical on every standard
// library.
std::vector<std::vector<int64_t>> PlanEpoch(const std::vector<EncodedExample>& data,
                                            int micro_batch_size, bool shuffle, uint64_t seed,
                                            int epoch);

// Builds the batches of plan[start..] on its own thread, keeping up to `depth` ready, so that
// padding and copying overlap with the model's step. `data` must outlive the prefetcher.
class BatchPrefetcher {
 public:
  BatchPrefetcher(const std::vector<EncodedExample>* data, std::vector<std::vector<int64_t>> plan,
                  size_t start, int32_t pad_id, int depth = 4);
  // Stops the producer and joins it, also when the consumer stopped before the end.
  ~BatchPrefetcher();

  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Blocks until the next batch is ready; std::nullopt once the plan is exhausted.
  std::optional<Batch> Next();

 private:
  void Produce();

  const std::vector<EncodedExample>* data_;
  const std::vector<std::vector<int64_t>> plan_;
  const size_t start_;
  const int32_t pad_id_;
  const size_t depth_;

  std::mutex mu_;
  std::condition_variable cv_;  // signals both "space freed" and "batch ready / done"
  std::deque<Batch> ready_;     // guarded by mu_
  bool stop_ = false;           // guarded by mu_; set by the destructor
  bool done_ = false;           // guarded by mu_; the producer has pushed its last batch
  std::thread thread_;          // last member: started after everything above exists
};

// Encodes every sentence with `encode` (text -> ids), in parallel over
// std::thread::hardware_concurrency() threads, keeping order; labels are copied. `encode` is
// called concurrently and must be thread-safe; an exception from it is rethrown here after all
// threads have joined.
std::vector<EncodedExample> EncodeAll(
    const std::vector<Example>& examples,
    const std::function<std::vector<int32_t>(std::string_view)>& encode);

}  // namespace ringmaster::trainer
