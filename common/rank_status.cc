#include "common/rank_status.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ringmaster::trainer {

using A = std::atomic<uint64_t>;
static_assert(A::is_always_lock_free, "the status block needs lock-free 64-bit atomics");

constexpr uint64_t kMagic = 0x3154415453524d52ull;  // "RMSTAT1" + version byte, little-endian
constexpr size_t kStepBuckets = kStepSecondsBounds.size() + 1;
constexpr size_t kCheckpointBuckets = kCheckpointSecondsBounds.size() + 1;

// The layout both processes map. Only ever appended to; kMagic changes when it cannot be.
struct RankStatusBlock {
  A magic, size, pid;
  A world_size, steps_planned;
  // The collective entered last, under coll_lock (odd while being written).
  A coll_lock, coll_seq, coll_op, coll_in, coll_entered_ns;
  A comm_ns[kNumCollectives];
  // Training, written by the step loop.
  A steps_total, step, samples_total, tokens_total, data_wait_ns;
  A loss_bits, lr_bits, grad_norm_bits, last_step_ns;
  A step_buckets[kStepBuckets], step_sum_ns, step_count;
  A has_eval, eval_loss_bits, eval_accuracy_bits;
  A ckpt_buckets[kCheckpointBuckets], ckpt_sum_ns, ckpt_count, ckpt_bytes;
  A gather_bytes, reduce_raw_bytes, reduce_wire_bytes;
  A has_memory, state_persistent, state_peak;
  A has_device, gpu_allocated, gpu_peak, gpu_arena, gpu_step_ns, gpu_busy_ns;
  A skipped_steps, loss_scale_bits;
  A gpu_comm_ns, gpu_comm_total_ns;
  A gpu_exposed_comm_ns, gpu_exposed_comm_total_ns;
};

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

uint64_t Bits(double v) { return absl::bit_cast<uint64_t>(v); }
double FromBits(uint64_t b) { return absl::bit_cast<double>(b); }
uint64_t Nanos(double seconds) {
  return seconds > 0 ? static_cast<uint64_t>(std::llround(seconds * 1e9)) : 0;
}
uint64_t UnixNanosNow() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}
void Add(A& a, uint64_t v) { a.fetch_add(v, kRelaxed); }
void Set(A& a, uint64_t v) { a.store(v, kRelaxed); }
uint64_t Get(const A& a) { return a.load(kRelaxed); }

template <size_t N, size_t B>
void Observe(A (&buckets)[B], A& sum_ns, A& count, const std::array<double, N>& bounds,
             double seconds) {
  static_assert(B == N + 1);
  const size_t i = std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin();
  Add(buckets[i], 1);
  Add(sum_ns, Nanos(seconds));
  Add(count, 1);
}

template <size_t B>
HistogramFigures ReadHistogram(const A (&buckets)[B], const A& sum_ns, const A& count) {
  HistogramFigures h;
  h.counts.resize(B);
  for (size_t i = 0; i < B; ++i) h.counts[i] = Get(buckets[i]);
  h.sum = static_cast<double>(Get(sum_ns)) * 1e-9;
  h.count = Get(count);
  return h;
}

RankFigures Read(const RankStatusBlock& b) {
  RankFigures f;
  f.pid = static_cast<int64_t>(Get(b.pid));
  f.world_size = static_cast<int64_t>(Get(b.world_size));
  f.steps_planned = static_cast<int64_t>(Get(b.steps_planned));
  // The writer holds the lock for a few stores, so a retry or two is usually enough; a writer
  // entering collectives back to back can keep it busy longer, so later attempts yield. The bound
  // matters when the writer was stopped or killed while holding the lock: then no consistent
  // copy exists and the collective is reported as unknown (number 0), never as a torn mix.
  bool consistent = false;
  for (int attempt = 0; attempt < 20000 && !consistent; ++attempt) {
    if (attempt >= 16) std::this_thread::yield();
    const uint64_t before = b.coll_lock.load(std::memory_order_acquire);
    f.collective_seq = Get(b.coll_seq);
    const uint64_t op = Get(b.coll_op);
    f.collective_op = static_cast<Collective>(op < kNumCollectives ? op : 0);
    f.in_collective = Get(b.coll_in) != 0;
    f.collective_entered_unix = static_cast<double>(Get(b.coll_entered_ns)) * 1e-9;
    std::atomic_thread_fence(std::memory_order_acquire);
    consistent = before % 2 == 0 && b.coll_lock.load(kRelaxed) == before;
  }
  if (!consistent) {
    f.collective_seq = 0;
    f.collective_op = Collective::kAllReduceSum;
    f.in_collective = false;
    f.collective_entered_unix = 0;
  }
  for (int i = 0; i < kNumCollectives; ++i) {
    f.comm_seconds[i] = static_cast<double>(Get(b.comm_ns[i])) * 1e-9;
  }
  f.steps_total = static_cast<int64_t>(Get(b.steps_total));
  f.step = static_cast<int64_t>(Get(b.step));
  f.samples_total = Get(b.samples_total);
  f.tokens_total = Get(b.tokens_total);
  f.data_wait_seconds = static_cast<double>(Get(b.data_wait_ns)) * 1e-9;
  f.loss = FromBits(Get(b.loss_bits));
  f.learning_rate = FromBits(Get(b.lr_bits));
  f.grad_norm = FromBits(Get(b.grad_norm_bits));
  f.last_step_unix = static_cast<double>(Get(b.last_step_ns)) * 1e-9;
  f.step_seconds = ReadHistogram(b.step_buckets, b.step_sum_ns, b.step_count);
  f.has_eval = Get(b.has_eval) != 0;
  f.eval_loss = FromBits(Get(b.eval_loss_bits));
  f.eval_accuracy = FromBits(Get(b.eval_accuracy_bits));
  f.checkpoint_seconds = ReadHistogram(b.ckpt_buckets, b.ckpt_sum_ns, b.ckpt_count);
  f.checkpoint_bytes_total = Get(b.ckpt_bytes);
  f.gather_bytes = Get(b.gather_bytes);
  f.reduce_raw_bytes = Get(b.reduce_raw_bytes);
  f.reduce_wire_bytes = Get(b.reduce_wire_bytes);
  f.has_memory = Get(b.has_memory) != 0;
  f.state_persistent_bytes = Get(b.state_persistent);
  f.state_peak_transient_bytes = Get(b.state_peak);
  f.skipped_steps_total = Get(b.skipped_steps);
  f.loss_scale = FromBits(Get(b.loss_scale_bits));
  f.has_device = Get(b.has_device) != 0;
  f.device.allocated_bytes = Get(b.gpu_allocated);
  f.device.peak_allocated_bytes = Get(b.gpu_peak);
  f.device.arena_bytes = Get(b.gpu_arena);
  f.device.step_seconds = static_cast<double>(Get(b.gpu_step_ns)) * 1e-9;
  f.device.busy_seconds_total = static_cast<double>(Get(b.gpu_busy_ns)) * 1e-9;
  f.device.comm_seconds = static_cast<double>(Get(b.gpu_comm_ns)) * 1e-9;
  f.device.comm_seconds_total = static_cast<double>(Get(b.gpu_comm_total_ns)) * 1e-9;
  f.device.exposed_comm_seconds = static_cast<double>(Get(b.gpu_exposed_comm_ns)) * 1e-9;
  f.device.exposed_comm_seconds_total =
      static_cast<double>(Get(b.gpu_exposed_comm_total_ns)) * 1e-9;
  return f;
}

void Init(RankStatusBlock* b) {
  Set(b->size, sizeof(RankStatusBlock));
  Set(b->pid, static_cast<uint64_t>(::getpid()));
  // Last, with release: a reader that sees the magic sees an initialised block.
  b->magic.store(kMagic, std::memory_order_release);
}

}  // namespace

double RankFigures::comm_seconds_total() const {
  double s = 0;
  for (double v : comm_seconds) s += v;
  return s;
}

absl::StatusOr<std::unique_ptr<RankStatus>> RankStatus::CreateFile(const std::string& path) {
  // Built under a temporary name and renamed into place: a reader never sees a short or
  // uninitialised block.
  // Never renamed over a device or FIFO (issue #33): the status file is the agent's to name.
  if (absl::Status s = CheckReplaceableByRename(AT_FDCWD, path, path); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("rank status file ", s.message()));
  }
  const std::string tmp = absl::StrCat(path, ".tmp");
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("rank status file ", path, ": cannot create: ", std::strerror(errno)));
  }
  const size_t length = sizeof(RankStatusBlock);
  if (::ftruncate(fd, static_cast<off_t>(length)) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("rank status file ", path, ": cannot size: ", std::strerror(e)));
  }
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::UnavailableError(
        absl::StrCat("rank status file ", path, ": cannot map: ", std::strerror(e)));
  }
  auto* block = static_cast<RankStatusBlock*>(p);  // zero-filled by ftruncate
  Init(block);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::munmap(p, length);
    ::unlink(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("rank status file ", path, ": cannot rename into place: ", std::strerror(e)));
  }
  return std::unique_ptr<RankStatus>(new RankStatus(block, length, false));
}

std::unique_ptr<RankStatus> RankStatus::CreateAnonymous() {
  auto* block = new RankStatusBlock();  // value-initialised: zero
  Init(block);
  return std::unique_ptr<RankStatus>(new RankStatus(block, 0, true));
}

RankStatus::RankStatus(RankStatusBlock* block, size_t length, bool anonymous)
    : block_(block), length_(anonymous ? 0 : length) {}

RankStatus::~RankStatus() {
  if (length_ == 0) {
    delete block_;
  } else {
    ::munmap(block_, length_);
  }
}

RankFigures RankStatus::Snapshot() const { return Read(*block_); }

void RankStatus::OnStart(int world_size, int64_t total_steps) {
  Set(block_->world_size, static_cast<uint64_t>(world_size));
  Set(block_->steps_planned, static_cast<uint64_t>(total_steps));
}

void RankStatus::OnStep(const StepFigures& f, const CommTotals& comm) {
  RankStatusBlock& b = *block_;
  Add(b.steps_total, 1);
  Set(b.step, static_cast<uint64_t>(f.step));
  Add(b.samples_total, static_cast<uint64_t>(f.samples));
  Add(b.tokens_total, static_cast<uint64_t>(f.tokens));
  Add(b.data_wait_ns, Nanos(f.data_wait_seconds));
  Set(b.loss_bits, Bits(f.loss));
  Set(b.lr_bits, Bits(f.learning_rate));
  Set(b.grad_norm_bits, Bits(f.grad_norm));
  Set(b.last_step_ns, Nanos(f.unix_time));
  if (f.skipped) Add(b.skipped_steps, 1);
  Set(b.loss_scale_bits, Bits(f.loss_scale));
  Observe(b.step_buckets, b.step_sum_ns, b.step_count, kStepSecondsBounds, f.seconds);
  Set(b.gather_bytes, comm.gather_bytes);
  Set(b.reduce_raw_bytes, comm.reduce_raw_bytes);
  Set(b.reduce_wire_bytes, comm.reduce_wire_bytes);
}

void RankStatus::OnEval(double loss, double accuracy) {
  Set(block_->eval_loss_bits, Bits(loss));
  Set(block_->eval_accuracy_bits, Bits(accuracy));
  Set(block_->has_eval, 1);
}

void RankStatus::OnCheckpoint(double seconds, uint64_t bytes) {
  Observe(block_->ckpt_buckets, block_->ckpt_sum_ns, block_->ckpt_count, kCheckpointSecondsBounds,
          seconds);
  Add(block_->ckpt_bytes, bytes);
}

void RankStatus::OnMemory(uint64_t persistent_bytes, uint64_t peak_transient_bytes) {
  Set(block_->state_persistent, persistent_bytes);
  Set(block_->state_peak, peak_transient_bytes);
  Set(block_->has_memory, 1);
}

void RankStatus::OnDevice(const DeviceFigures& d) {
  Set(block_->gpu_allocated, d.allocated_bytes);
  Set(block_->gpu_peak, d.peak_allocated_bytes);
  Set(block_->gpu_arena, d.arena_bytes);
  Set(block_->gpu_step_ns, Nanos(d.step_seconds));
  Set(block_->gpu_busy_ns, Nanos(d.busy_seconds_total));
  Set(block_->gpu_comm_ns, Nanos(d.comm_seconds));
  Set(block_->gpu_comm_total_ns, Nanos(d.comm_seconds_total));
  Set(block_->gpu_exposed_comm_ns, Nanos(d.exposed_comm_seconds));
  Set(block_->gpu_exposed_comm_total_ns, Nanos(d.exposed_comm_seconds_total));
  Set(block_->has_device, 1);
}

void RankStatus::OnEnter(uint64_t seq, Collective op) {
  RankStatusBlock& b = *block_;
  const uint64_t v = b.coll_lock.load(kRelaxed);
  b.coll_lock.store(v + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  Set(b.coll_seq, seq);
  Set(b.coll_op, static_cast<uint64_t>(op));
  Set(b.coll_in, 1);
  Set(b.coll_entered_ns, UnixNanosNow());
  b.coll_lock.store(v + 2, std::memory_order_release);
}

void RankStatus::OnLeave(uint64_t seq, Collective op, double seconds) {
  RankStatusBlock& b = *block_;
  Add(b.comm_ns[static_cast<int>(op)], Nanos(seconds));
  if (Get(b.coll_seq) != seq) return;  // A later collective (another thread) already entered.
  const uint64_t v = b.coll_lock.load(kRelaxed);
  b.coll_lock.store(v + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  Set(b.coll_in, 0);
  b.coll_lock.store(v + 2, std::memory_order_release);
}

absl::StatusOr<RankFigures> ReadRankStatusFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return absl::NotFoundError(absl::StrCat("no rank status file ", path));
    return absl::UnavailableError(
        absl::StrCat("rank status file ", path, ": cannot open: ", std::strerror(e)));
  }
  struct stat st = {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != sizeof(RankStatusBlock)) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat("rank status file ", path, ": size ", st.st_size,
                                            ", expected ", sizeof(RankStatusBlock)));
  }
  void* p = ::mmap(nullptr, sizeof(RankStatusBlock), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("rank status file ", path, ": cannot map"));
  }
  const auto* b = static_cast<const RankStatusBlock*>(p);
  absl::StatusOr<RankFigures> out;
  if (b->magic.load(std::memory_order_acquire) != kMagic) {
    out = absl::DataLossError(
        absl::StrCat("rank status file ", path, ": not a ringmaster rank status block"));
  } else {
    out = Read(*b);
  }
  ::munmap(p, sizeof(RankStatusBlock));
  return out;
}

}  // namespace ringmaster::trainer
