#include "trainer/data/batcher.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <utility>

namespace ringmaster::trainer {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) by rejection: drop draws below 2^64 mod bound so that every residue has
// the same number of preimages. Written out because std::uniform_int_distribution's algorithm
// differs between standard libraries.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

template <typename T>
void FisherYates(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(UniformBelow(rng, i));  // in [0, i - 1]
    std::swap(v[i - 1], v[j]);
  }
}

// Row r of the batch is row_at(r); example_index becomes `indices`.
template <typename RowAt>
Batch Assemble(const RowAt& row_at, const std::vector<int64_t>& indices, int32_t pad_id) {
  Batch b;
  b.batch_size = static_cast<int>(indices.size());
  size_t seq = 0;
  for (size_t r = 0; r < indices.size(); ++r) seq = std::max(seq, row_at(r).ids.size());
  b.seq_len = static_cast<int>(seq);
  const size_t cells = indices.size() * seq;
  b.input_ids.assign(cells, pad_id);
  b.attention_mask.assign(cells, 0.0f);
  b.token_type_ids.assign(cells, 0);
  b.labels.reserve(indices.size());
  b.example_index = indices;
  for (size_t r = 0; r < indices.size(); ++r) {
    const EncodedExample& ex = row_at(r);
    std::copy(ex.ids.begin(), ex.ids.end(), b.input_ids.begin() + r * seq);
    std::fill_n(b.attention_mask.begin() + r * seq, ex.ids.size(), 1.0f);
    std::copy(ex.type_ids.begin(), ex.type_ids.end(), b.token_type_ids.begin() + r * seq);
    b.labels.push_back(ex.label);
  }
  return b;
}

}  // namespace

Batch MakeBatch(const std::vector<EncodedExample>& data, const std::vector<int64_t>& indices,
                int32_t pad_id) {
  return Assemble([&](size_t r) -> const EncodedExample& { return data[indices[r]]; }, indices,
                  pad_id);
}

Batch MakeBatchFromRows(const std::vector<EncodedExample>& rows,
                        const std::vector<int64_t>& example_index, int32_t pad_id) {
  if (rows.size() != example_index.size()) {
    std::fprintf(stderr, "MakeBatchFromRows: %zu rows but %zu example indices\n", rows.size(),
                 example_index.size());
    std::abort();
  }
  return Assemble([&](size_t r) -> const EncodedExample& { return rows[r]; }, example_index,
                  pad_id);
}

int64_t PaddingTokens(const std::vector<EncodedExample>& data,
                      const std::vector<std::vector<int64_t>>& plan) {
  int64_t pad = 0;
  for (const auto& mb : plan) {
    size_t longest = 0;
    for (int64_t i : mb) longest = std::max(longest, data[i].ids.size());
    for (int64_t i : mb) pad += static_cast<int64_t>(longest - data[i].ids.size());
  }
  return pad;
}

std::vector<uint32_t> TokenLengths(const std::vector<EncodedExample>& data) {
  std::vector<uint32_t> keys(data.size());
  for (size_t i = 0; i < data.size(); ++i) keys[i] = static_cast<uint32_t>(data[i].ids.size());
  return keys;
}

std::vector<std::vector<int64_t>> PlanEpoch(const std::vector<uint32_t>& length_keys,
                                            int micro_batch_size, bool shuffle, uint64_t seed,
                                            int epoch) {
  if (micro_batch_size < 1) {
    std::fprintf(stderr, "PlanEpoch: micro_batch_size must be >= 1, got %d\n", micro_batch_size);
    std::abort();
  }
  const size_t n = length_keys.size();
  const size_t mbs = static_cast<size_t>(micro_batch_size);
  std::vector<int64_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);

  std::vector<std::vector<int64_t>> plan;
  plan.reserve((n + mbs - 1) / mbs);
  if (!shuffle) {
    for (size_t b = 0; b < n; b += mbs) {
      plan.emplace_back(order.begin() + b, order.begin() + std::min(n, b + mbs));
    }
    return plan;
  }

  std::mt19937_64 rng(
      SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch) + 0x9E3779B97F4A7C15ULL)));
  FisherYates(order, rng);
  // Pools bound how far sorting can pull similar lengths together: large enough that batches
  // are nearly uniform in length, small enough that the epoch stays well mixed.
  const size_t pool = 64 * mbs;
  auto by_length = [&length_keys](int64_t a, int64_t b) { return length_keys[a] < length_keys[b]; };
  for (size_t p = 0; p < n; p += pool) {
    auto first = order.begin() + p;
    auto last = order.begin() + std::min(n, p + pool);
    std::stable_sort(first, last, by_length);
    for (auto it = first; it < last; it += std::min<ptrdiff_t>(mbs, last - it)) {
      plan.emplace_back(it, it + std::min<ptrdiff_t>(mbs, last - it));
    }
  }
  // Without this the epoch would walk each pool from short to long batches.
  FisherYates(plan, rng);
  return plan;
}

namespace {

std::pair<size_t, BatchPrefetcher::Builder> FromPlan(const std::vector<EncodedExample>* data,
                                                     std::vector<std::vector<int64_t>> plan,
                                                     size_t start, int32_t pad_id) {
  const size_t count = plan.size() > start ? plan.size() - start : 0;
  auto shared = std::make_shared<const std::vector<std::vector<int64_t>>>(std::move(plan));
  return {count, [data, shared, start, pad_id](size_t i) -> absl::StatusOr<Batch> {
            return MakeBatch(*data, (*shared)[start + i], pad_id);
          }};
}

}  // namespace

BatchPrefetcher::BatchPrefetcher(size_t count, Builder build, int depth)
    : BatchPrefetcher(std::make_pair(count, std::move(build)), depth) {}

BatchPrefetcher::BatchPrefetcher(const std::vector<EncodedExample>* data,
                                 std::vector<std::vector<int64_t>> plan, size_t start,
                                 int32_t pad_id, int depth)
    : BatchPrefetcher(FromPlan(data, std::move(plan), start, pad_id), depth) {}

BatchPrefetcher::BatchPrefetcher(std::pair<size_t, Builder> source, int depth)
    : count_(source.first),
      build_(std::move(source.second)),
      depth_(static_cast<size_t>(std::max(depth, 1))),
      thread_([this] { Produce(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BatchPrefetcher::Produce() {
  for (size_t i = 0; i < count_; ++i) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || ready_.size() < depth_; });
      if (stop_) break;
    }
    // Built outside the lock so the consumer can pop while this one is assembled.
    absl::StatusOr<Batch> b = build_(i);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      if (!b.ok()) {
        error_ = b.status();
        break;
      }
      ready_.push_back(*std::move(b));
    }
    cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

std::optional<Batch> BatchPrefetcher::Next() {
  std::optional<Batch> out;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !ready_.empty() || done_; });
    if (ready_.empty()) return std::nullopt;
    out.emplace(std::move(ready_.front()));
    ready_.pop_front();
  }
  cv_.notify_all();
  return out;
}

absl::Status BatchPrefetcher::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

namespace {

// Runs encode_one(i) for every example, in parallel (see EncodeAll).
std::vector<EncodedExample> EncodeEach(
    size_t n, const std::function<void(size_t i, EncodedExample* out)>& encode_one) {
  std::vector<EncodedExample> out(n);
  size_t threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  // Small chunks claimed from a shared counter balance uneven sentence lengths across threads.
  constexpr size_t kChunk = 256;
  threads = std::min(threads, (n + kChunk - 1) / kChunk);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (;;) {
      size_t begin = next.fetch_add(kChunk);
      if (begin >= n || failed.load(std::memory_order_relaxed)) return;
      size_t end = std::min(n, begin + kChunk);
      try {
        for (size_t i = begin; i < end; ++i) encode_one(i, &out[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(work);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace

std::vector<EncodedExample> EncodeAll(
    const std::vector<Example>& examples,
    const std::function<std::vector<int32_t>(std::string_view)>& encode) {
  return EncodeEach(examples.size(), [&](size_t i, EncodedExample* out) {
    out->ids = encode(examples[i].sentence);
    out->label = examples[i].label;
  });
}

std::vector<EncodedExample> EncodeAllPairs(const std::vector<Example>& examples,
                                           const PairEncoder& encode) {
  return EncodeEach(examples.size(), [&](size_t i, EncodedExample* out) {
    out->ids = encode(examples[i].sentence, examples[i].text_pair, &out->type_ids);
    out->label = examples[i].label;
  });
}

}  // namespace ringmaster::trainer
