// Turning encoded examples into padded batches: the per-epoch order (with length bucketing so
// that dynamic padding wastes little), the batch layout, a background producer that overlaps
// batch building (and, for the training set, reading and tokenising) with compute, and parallel
// encoding of a whole data set.
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
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/data/tsv.h"

namespace ringmaster::trainer {

struct EncodedExample {
  std::vector<int32_t>
      ids;  // [CLS] ... [SEP] (pairs: [CLS] a [SEP] b [SEP]), truncated, not padded
  float label = 0;
  std::vector<int32_t> type_ids;  // token type ids, as many as ids; empty: all 0
};

// A sentence pair to ids ([CLS] a [SEP] b [SEP], truncated) and its token type ids.
using PairEncoder = std::function<std::vector<int32_t>(std::string_view a, std::string_view b,
                                                       std::vector<int32_t>* type_ids)>;

// Padded to the longest row in the batch (dynamic padding), not to max_len.
struct Batch {
  int batch_size = 0;
  int seq_len = 0;
  std::vector<int32_t> input_ids;       // [batch_size * seq_len], row-major
  std::vector<float> attention_mask;    // 1 for tokens, 0 for padding
  std::vector<int32_t> token_type_ids;  // 0, and 1 for a pair's second text
  std::vector<float> labels;            // [batch_size]
  std::vector<int64_t> example_index;   // row in the source file, for predict output ordering

  bool operator==(const Batch&) const = default;
};

// Gathers data[indices[i]] into row i. Empty `indices` gives an empty batch (0 x 0).
Batch MakeBatch(const std::vector<EncodedExample>& data, const std::vector<int64_t>& indices,
                int32_t pad_id);
// The same when the rows were encoded for this batch only: rows[i] (example example_index[i])
// goes into row i. The two vectors must have the same size.
Batch MakeBatchFromRows(const std::vector<EncodedExample>& rows,
                        const std::vector<int64_t>& example_index, int32_t pad_id);

// Token counts of encoded examples, as length keys for PlanEpoch.
std::vector<uint32_t> TokenLengths(const std::vector<EncodedExample>& data);
// The padding tokens a plan's micro-batches carry (each is padded to its longest row): what
// length bucketing saves.
int64_t PaddingTokens(const std::vector<EncodedExample>& data,
                      const std::vector<std::vector<int64_t>>& plan);

// The order of one epoch over examples 0..length_keys.size()-1 as a list of micro-batches of
// example indices; every example appears exactly once. length_keys[i] is example i's length by
// any measure that orders examples roughly as their token counts do: the trainer uses the
// words + [CLS] + [SEP], which every rank reads from the row index without tokenising
// (TsvRowIndex::LengthKeys), so every rank draws the same plan whatever the world size;
// TokenLengths gives token counts. Only the keys' order matters. micro_batch_size must be >= 1
// (the process aborts otherwise: it is a config bug that must not turn into an empty epoch).
//
// shuffle == false: file order, consecutive chunks of micro_batch_size (the last may be short).
// shuffle == true: length-bucketed. A std::mt19937_64 is seeded with
//   SplitMix64(seed ^ SplitMix64(epoch + 0x9E3779B97F4A7C15))
// (SplitMix64 = Steele et al.'s finalizer, as in java.util.SplittableRandom), then:
//   1. all indices are permuted by Fisher-Yates (i from n-1 down to 1, j uniform in [0, i]),
//   2. the permutation is cut into pools of 64 * micro_batch_size,
//   3. each pool is stably sorted by length key and cut into micro-batches (only the last pool
//      can leave a short one),
//   4. the micro-batch order is shuffled by Fisher-Yates with the same engine.
// "Uniform in [0, i]" draws 64-bit words and rejects those below 2^64 mod (i+1), then reduces
// mod (i+1); no standard distribution is used, so plans are identical on every standard
// library.
std::vector<std::vector<int64_t>> PlanEpoch(const std::vector<uint32_t>& length_keys,
                                            int micro_batch_size, bool shuffle, uint64_t seed,
                                            int epoch);

// Builds batches on its own thread, keeping up to `depth` ready, so that reading, tokenising,
// padding and copying overlap with the model's step.
class BatchPrefetcher {
 public:
  // Builds batch i for i = 0, 1, ..., count - 1, in order, on the producer thread. The first
  // error ends the stream: Next() returns std::nullopt and status() the error.
  using Builder = std::function<absl::StatusOr<Batch>(size_t i)>;
  BatchPrefetcher(size_t count, Builder build, int depth = 4);
  // The batches of plan[start..] from encoded `data`, which must outlive the prefetcher.
  BatchPrefetcher(const std::vector<EncodedExample>* data, std::vector<std::vector<int64_t>> plan,
                  size_t start, int32_t pad_id, int depth = 4);
  // Stops the producer and joins it, also when the consumer stopped before the end.
  ~BatchPrefetcher();

  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Blocks until the next batch is ready; std::nullopt once all are taken or a build failed.
  std::optional<Batch> Next();
  // The build error that ended the stream early; OK otherwise.
  absl::Status status();

 private:
  BatchPrefetcher(std::pair<size_t, Builder> source, int depth);
  void Produce();

  const size_t count_;
  const Builder build_;
  const size_t depth_;

  std::mutex mu_;
  std::condition_variable cv_;  // signals both "space freed" and "batch ready / done"
  std::deque<Batch> ready_;     // guarded by mu_
  absl::Status error_;          // guarded by mu_; the build error that ended the stream
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
// The same for sentence pairs (Example::sentence, Example::text_pair).
std::vector<EncodedExample> EncodeAllPairs(const std::vector<Example>& examples,
                                           const PairEncoder& encode);

}  // namespace ringmaster::trainer
