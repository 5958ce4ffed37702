// ctest-labels: unit;integration
// Real multi-process Gloo collectives over loopback TCP: each rank is a fork()ed child with its
// own communicator, rendezvousing through a FileStore in a temporary directory. Results are
// checked exactly against sums computed independently here (small integers are exact in float,
// whatever order Gloo adds them in).
#include "trainer/comm/gloo_communicator.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer/comm/float16.h"
#include "trainer/comm/store.h"

namespace ringmaster::trainer {
namespace {

constexpr absl::Duration kOpTimeout = absl::Seconds(5);

// A rank's body: returns "" on success or a description of what went wrong.
using RankFn = std::function<std::string(int rank, int size, Store& store)>;

struct RankOutcome {
  std::string message;  // What the child reported ("" = success).
  int wait_status = 0;
  bool reported = false;  // The child wrote its report and exited normally.
};

// Forks `size` children running `fn`, each reporting through a pipe. Waits at most `deadline`
// for all of them (poll on the pipes, so no sleeping); children still running then are killed
// and reported as hung.
std::vector<RankOutcome> RunRanks(int size, absl::Duration deadline, const RankFn& fn) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gloo_test.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    return {};
  }
  const std::string dir = tmpl;

  std::vector<pid_t> pids(size, -1);
  std::vector<int> fds(size, -1);
  for (int r = 0; r < size; ++r) {
    int p[2];
    if (::pipe(p) != 0) {
      ADD_FAILURE() << "pipe failed";
      break;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string msg;
      auto store = FileStore::Create(dir);
      if (!store.ok()) {
        msg = absl::StrCat("rank ", r, ": ", store.status().ToString());
      } else {
        msg = fn(r, size, **store);
      }
      std::string line = msg.empty() ? "OK" : msg;
      ssize_t unused = ::write(p[1], line.data(), line.size());
      (void)unused;
      ::_exit(msg.empty() ? 0 : 1);  // Skip gtest/static teardown inherited from the parent.
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }

  std::vector<RankOutcome> out(size);
  const absl::Time end = absl::Now() + deadline;
  int open = 0;
  for (int fd : fds) open += fd >= 0;
  while (open > 0) {
    std::vector<pollfd> pfds;
    std::vector<int> which;
    for (int r = 0; r < size; ++r) {
      if (fds[r] >= 0) {
        pfds.push_back({fds[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    int left_ms = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
    if (left_ms <= 0) break;
    int n = ::poll(pfds.data(), pfds.size(), left_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      int r = which[i];
      char buf[4096];
      ssize_t got = ::read(fds[r], buf, sizeof(buf));
      if (got > 0) {
        out[r].message.append(buf, got);
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[r]);
        fds[r] = -1;
        --open;
      }
    }
  }
  for (int r = 0; r < size; ++r) {
    if (pids[r] <= 0) continue;
    if (fds[r] >= 0) {  // Still running past the deadline: a hang.
      ::kill(pids[r], SIGKILL);
      ::close(fds[r]);
      out[r].message = absl::StrCat("rank ", r, " still running after ",
                                    absl::FormatDuration(deadline), " (hung); killed");
    }
    ::waitpid(pids[r], &out[r].wait_status, 0);
    out[r].reported = WIFEXITED(out[r].wait_status) && !out[r].message.empty();
  }
  std::filesystem::remove_all(dir);
  return out;
}

void ExpectAllOk(const std::vector<RankOutcome>& outcomes) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    EXPECT_TRUE(outcomes[r].reported && outcomes[r].message == "OK" &&
                WEXITSTATUS(outcomes[r].wait_status) == 0)
        << "rank " << r << ": " << outcomes[r].message << " (wait status "
        << outcomes[r].wait_status << ")";
  }
}

#define CHILD_CHECK_OK(expr)                                                          \
  do {                                                                                \
    absl::Status s_ = (expr);                                                         \
    if (!s_.ok()) return absl::StrCat("rank ", rank, ": " #expr ": ", s_.ToString()); \
  } while (0)

std::string MismatchAt(const char* op, int rank, size_t i, float got, float want) {
  return absl::StrCat("rank ", rank, ": ", op, "[", i, "] = ", got, ", want ", want);
}

// Every collective, twice (so sequence numbers/tags advance), on sizes that do not divide
// evenly into Gloo's segments.
std::string RunAllCollectives(int rank, int size, Store& store) {
  auto comm_or = GlooCommunicator::Create(store, rank, size, "127.0.0.1", kOpTimeout);
  if (!comm_or.ok()) return absl::StrCat("rank ", rank, ": Create: ", comm_or.status().ToString());
  Communicator& comm = **comm_or;
  if (comm.rank() != rank || comm.size() != size) return "rank/size mismatch";

  const double rank_sum = size * (size - 1) / 2.0;   // sum of r
  const double rank1_sum = size * (size + 1) / 2.0;  // sum of (r + 1)
  for (int iter = 0; iter < 2; ++iter) {
    // AllReduceSum: data[i] = 1000 r + i + iter  ->  1000 Σr + size (i + iter).
    const size_t n = 1037;
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = 1000.0f * rank + i + iter;
    CHILD_CHECK_OK(comm.AllReduceSum(data.data(), n));
    for (size_t i = 0; i < n; ++i) {
      float want = static_cast<float>(1000.0 * rank_sum + size * (double(i) + iter));
      if (data[i] != want) return MismatchAt("AllReduceSum", rank, i, data[i], want);
    }

    // ReduceScatterSum: in[j] = (r + 1)(j + 1)  ->  out[i] = Σ(r+1) · (rank k + i + 1).
    const size_t k = 259;
    std::vector<float> in(k * size), out(k, -1.0f);
    for (size_t j = 0; j < in.size(); ++j) in[j] = static_cast<float>((rank + 1) * (j + 1));
    const std::vector<float> in_copy = in;
    CHILD_CHECK_OK(comm.ReduceScatterSum(in.data(), out.data(), k));
    if (in != in_copy) return absl::StrCat("rank ", rank, ": ReduceScatterSum modified its input");
    for (size_t i = 0; i < k; ++i) {
      float want = static_cast<float>(rank1_sum * (rank * k + i + 1));
      if (out[i] != want) return MismatchAt("ReduceScatterSum", rank, i, out[i], want);
    }

    // AllGather: in[i] = 100 r + i  ->  out[r k + i].
    std::vector<float> mine(k), all(k * size, -1.0f);
    for (size_t i = 0; i < k; ++i) mine[i] = 100.0f * rank + i;
    CHILD_CHECK_OK(comm.AllGather(mine.data(), all.data(), k));
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < k; ++i) {
        float want = 100.0f * r + i;
        if (all[r * k + i] != want)
          return MismatchAt("AllGather", rank, r * k + i, all[r * k + i], want);
      }
    }

    // AllToAll (bytes): block j of rank r carries (r, j, i); rank `rank` receives block
    // `rank` of every rank r, in rank order. 5 bytes per block: not a multiple of 4.
    const size_t bpr = 5;
    std::vector<uint8_t> send(bpr * size), recv(bpr * size, 0xff);
    for (int j = 0; j < size; ++j) {
      for (size_t i = 0; i < bpr; ++i)
        send[j * bpr + i] = static_cast<uint8_t>(rank * 50 + j * 7 + i);
    }
    CHILD_CHECK_OK(comm.AllToAll(send.data(), recv.data(), bpr));
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < bpr; ++i) {
        const uint8_t want = static_cast<uint8_t>(r * 50 + rank * 7 + i);
        if (recv[r * bpr + i] != want) {
          return MismatchAt("AllToAll", rank, r * bpr + i, recv[r * bpr + i], want);
        }
      }
    }

    // AllGatherBytes: 3 bytes per rank.
    std::vector<uint8_t> mine_b = {static_cast<uint8_t>(rank), static_cast<uint8_t>(rank + 100),
                                   static_cast<uint8_t>(iter)};
    std::vector<uint8_t> all_b(3 * size, 0xff);
    CHILD_CHECK_OK(comm.AllGatherBytes(mine_b.data(), all_b.data(), 3));
    for (int r = 0; r < size; ++r) {
      if (all_b[3 * r] != r || all_b[3 * r + 1] != r + 100 || all_b[3 * r + 2] != iter) {
        return MismatchAt("AllGatherBytes", rank, 3 * r, all_b[3 * r], r);
      }
    }

    // Broadcast from the last rank (not 0, so a root mix-up shows).
    const int root = size - 1;
    std::vector<float> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = rank == root ? 7.0f + 3.0f * i + iter : -1.0f - rank;
    CHILD_CHECK_OK(comm.Broadcast(b.data(), n, root));
    for (size_t i = 0; i < n; ++i) {
      float want = 7.0f + 3.0f * i + iter;
      if (b[i] != want) return MismatchAt("Broadcast", rank, i, b[i], want);
    }

    CHILD_CHECK_OK(comm.Barrier());
  }
  if (comm.Broadcast(nullptr, 0, size).ok()) return "Broadcast accepted an out-of-range root";
  return "";
}

// ---- Typed collectives (bf16, fp16, int8, bytes) through the Work-returning interface.

// Element i of rank r's buffer, as the type's bits: values whose 16-bit sums need rounding
// (many significant bits, both signs), and small int8 values whose sums stay in range.
uint16_t Value16(DataType t, int r, size_t i) {
  const float v = (i % 3 == 0 ? -1.0f : 1.0f) * (1.0f + 0.37f * r + 0.0131f * i);
  return t == DataType::kBFloat16 ? Fp32ToBf16(v) : Fp32ToFp16(v);
}
int8_t ValueInt8(int r, size_t i) {
  return static_cast<int8_t>((r + 1) * (static_cast<int>(i % 7) - 3));
}
float ToFp32(DataType t, uint16_t h) {
  return t == DataType::kBFloat16 ? Bf16ToFp32(h) : Fp16ToFp32(h);
}
uint16_t FromFp32(DataType t, float f) {
  return t == DataType::kBFloat16 ? Fp32ToBf16(f) : Fp32ToFp16(f);
}

// Rank `rank`'s buffer of `count` elements of `t` (bytes), element i being Value(r, i + offset).
std::vector<uint8_t> Buffer(DataType t, int r, size_t count, size_t offset) {
  std::vector<uint8_t> b(count * DataTypeSize(t));
  for (size_t i = 0; i < count; ++i) {
    if (t == DataType::kInt8) {
      b[i] = static_cast<uint8_t>(ValueInt8(r, i + offset));
    } else {
      const uint16_t h = Value16(t, r, i + offset);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

// The expected sum of element i (index i + offset) over `size` ranks: int8 exactly; 16-bit
// types as the fp32 sum of the ranks' values in rank order, rounded once to the type.
std::vector<uint8_t> ExpectedSum(DataType t, int size, size_t count, size_t offset) {
  std::vector<uint8_t> b(count * DataTypeSize(t));
  for (size_t i = 0; i < count; ++i) {
    if (t == DataType::kInt8) {
      int sum = 0;
      for (int r = 0; r < size; ++r) sum += ValueInt8(r, i + offset);
      b[i] = static_cast<uint8_t>(static_cast<int8_t>(sum));
    } else {
      float acc = ToFp32(t, Value16(t, 0, i + offset));
      for (int r = 1; r < size; ++r) acc += ToFp32(t, Value16(t, r, i + offset));
      const uint16_t h = FromFp32(t, acc);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

std::string FirstMismatch(const char* op, DataType t, int rank, const std::vector<uint8_t>& got,
                          const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return absl::StrCat("rank ", rank, ": ", op, " size differs");
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::StrCat("rank ", rank, ": ", op, " ", DataTypeName(t), " byte ", i, " = ", got[i],
                          ", want ", want[i]);
    }
  }
  return "";
}

// Runs `work`, which a Gloo communicator hands back already done, and returns its status.
absl::Status DoneStatus(const std::shared_ptr<Work>& work, bool* was_done) {
  *was_done = work->IsDone();
  return work->Wait();
}

#define CHILD_CHECK_WORK(expr)                                                              \
  do {                                                                                      \
    bool done_ = false;                                                                     \
    absl::Status s_ = DoneStatus((expr), &done_);                                           \
    if (!done_) return absl::StrCat("rank ", rank, ": " #expr ": Work not done on return"); \
    if (!s_.ok()) return absl::StrCat("rank ", rank, ": " #expr ": ", s_.ToString());       \
  } while (0)

#define CHILD_RETURN_IF(text)   \
  do {                          \
    std::string e_ = (text);    \
    if (!e_.empty()) return e_; \
  } while (0)

std::string RunTypedCollectives(int rank, int size, Store& store) {
  auto comm_or = GlooCommunicator::Create(store, rank, size, "127.0.0.1", kOpTimeout);
  if (!comm_or.ok()) return absl::StrCat("rank ", rank, ": Create: ", comm_or.status().ToString());
  Communicator& comm = **comm_or;
  const CommStream own;
  for (DataType t : {DataType::kBFloat16, DataType::kFloat16, DataType::kInt8}) {
    // AllReduceSum on a count that no world size divides (the all-reduce pads its blocks).
    const size_t n = 1037;
    std::vector<uint8_t> data = Buffer(t, rank, n, 0);
    CHILD_CHECK_WORK(comm.AllReduceSumAsync(data.data(), n, t, own));
    CHILD_RETURN_IF(FirstMismatch("AllReduceSum", t, rank, data, ExpectedSum(t, size, n, 0)));

    // ReduceScatterSum: rank r's input block j holds elements j*k .. j*k+k-1.
    const size_t k = 259;
    std::vector<uint8_t> in = Buffer(t, rank, k * size, 0);
    std::vector<uint8_t> out(k * DataTypeSize(t), 0xee);
    CHILD_CHECK_WORK(comm.ReduceScatterSumAsync(in.data(), out.data(), k, t, own));
    CHILD_RETURN_IF(FirstMismatch("ReduceScatterSum", t, rank, out,
                                  ExpectedSum(t, size, k, static_cast<size_t>(rank) * k)));

    // AllGather: block r of the output is rank r's buffer, bit for bit.
    std::vector<uint8_t> mine = Buffer(t, rank, k, 5), all(k * size * DataTypeSize(t), 0xee);
    CHILD_CHECK_WORK(comm.AllGatherAsync(mine.data(), all.data(), k, t, own));
    std::vector<uint8_t> want_all;
    for (int r = 0; r < size; ++r) {
      const std::vector<uint8_t> b = Buffer(t, r, k, 5);
      want_all.insert(want_all.end(), b.begin(), b.end());
    }
    CHILD_RETURN_IF(FirstMismatch("AllGather", t, rank, all, want_all));

    // Broadcast from the last rank.
    std::vector<uint8_t> b =
        rank == size - 1 ? Buffer(t, rank, n, 11) : std::vector<uint8_t>(n * DataTypeSize(t), 0xee);
    CHILD_CHECK_WORK(comm.BroadcastAsync(b.data(), n, t, size - 1, own));
    CHILD_RETURN_IF(FirstMismatch("Broadcast", t, rank, b, Buffer(t, size - 1, n, 11)));

    // AllToAll of 3 elements per rank: rank receives block `rank` of every rank.
    std::vector<uint8_t> send = Buffer(t, rank, 3 * size, 0), recv(send.size(), 0xee);
    CHILD_CHECK_WORK(comm.AllToAllAsync(send.data(), recv.data(), 3, t, own));
    std::vector<uint8_t> want_recv;
    for (int r = 0; r < size; ++r) {
      const std::vector<uint8_t> from = Buffer(t, r, 3 * size, 0);
      const size_t block = 3 * DataTypeSize(t);
      want_recv.insert(want_recv.end(), from.begin() + rank * block,
                       from.begin() + (rank + 1) * block);
    }
    CHILD_RETURN_IF(FirstMismatch("AllToAll", t, rank, recv, want_recv));
  }

  // Raw bytes: all-to-all and all-gather of 7 bytes per rank through the typed interface.
  std::vector<uint8_t> send(7 * size), recv(7 * size, 0xee), gathered(7 * size, 0xee);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<uint8_t>(rank * 31 + i);
  CHILD_CHECK_WORK(comm.AllToAllAsync(send.data(), recv.data(), 7, DataType::kBytes, own));
  CHILD_CHECK_WORK(comm.AllGatherAsync(send.data(), gathered.data(), 7, DataType::kBytes, own));
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < 7; ++i) {
      if (recv[r * 7 + i] != static_cast<uint8_t>(r * 31 + rank * 7 + i)) {
        return absl::StrCat("rank ", rank, ": AllToAll bytes from rank ", r, " byte ", i);
      }
      if (gathered[r * 7 + i] != static_cast<uint8_t>(r * 31 + i)) {
        return absl::StrCat("rank ", rank, ": AllGather bytes from rank ", r, " byte ", i);
      }
    }
  }

  // Argument errors come back as done Works carrying InvalidArgument, and leave the
  // communicator usable (every rank makes the same mistakes, so no collective is skewed).
  auto expect_invalid = [&](const std::shared_ptr<Work>& w, const char* what) -> std::string {
    if (!w->IsDone()) return absl::StrCat("rank ", rank, ": ", what, ": Work not done");
    const absl::Status s = w->Wait();
    if (s.code() != absl::StatusCode::kInvalidArgument) {
      return absl::StrCat("rank ", rank, ": ", what, ": want InvalidArgument, got ", s.ToString());
    }
    return "";
  };
  uint8_t byte = 0;
  int stream_word = 0;  // Any non-null handle: Gloo takes no device stream.
  CHILD_RETURN_IF(
      expect_invalid(comm.AllReduceSumAsync(&byte, 1, DataType::kBytes, own), "sum of bytes"));
  CHILD_RETURN_IF(expect_invalid(comm.ReduceScatterSumAsync(&byte, &byte, 1, DataType::kBytes, own),
                                 "reduce-scatter of bytes"));
  CHILD_RETURN_IF(
      expect_invalid(comm.BroadcastAsync(&byte, 1, DataType::kInt8, size, own), "bad root"));
  CHILD_RETURN_IF(expect_invalid(
      comm.AllReduceSumAsync(&byte, 1, DataType::kInt8, CommStream(&stream_word)), "a stream"));
  CHILD_CHECK_WORK(comm.BarrierAsync(own));
  return "";
}

class GlooCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectivesTest, EveryCollectiveMatchesIndependentSums) {
  ExpectAllOk(RunRanks(GetParam(), absl::Seconds(60), RunAllCollectives));
}

TEST_P(GlooCollectivesTest, TypedCollectivesMatchSumsRoundedOnce) {
  ExpectAllOk(RunRanks(GetParam(), absl::Seconds(60), RunTypedCollectives));
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooCollectivesTest, ::testing::Values(1, 2, 3, 4));

// The last rank kills itself after a successful barrier; the survivors' next collective must
// fail with an error naming the operation, within the operation timeout, rather than hang.
TEST(GlooCommunicatorTest, SurvivorsFailBoundedWhenAPeerDies) {
  constexpr int kSize = 3;
  auto body = [](int rank, int size, Store& store) -> std::string {
    auto comm_or = GlooCommunicator::Create(store, rank, size, "127.0.0.1", kOpTimeout);
    if (!comm_or.ok()) return absl::StrCat("Create: ", comm_or.status().ToString());
    Communicator& comm = **comm_or;
    CHILD_CHECK_OK(comm.Barrier());  // Op #0: everyone is connected and alive.
    if (rank == size - 1) ::kill(::getpid(), SIGKILL);

    std::vector<float> data(4096, 1.0f);
    const absl::Time start = absl::Now();
    absl::Status s = comm.AllReduceSum(data.data(), data.size());  // Op #1.
    const absl::Duration took = absl::Now() - start;
    if (s.ok()) return absl::StrCat("rank ", rank, ": AllReduceSum succeeded without a peer");
    if (!absl::StrContains(s.message(), "AllReduceSum #1")) {
      return absl::StrCat("rank ", rank, ": error does not name the op: ", s.ToString());
    }
    if (s.code() != absl::StatusCode::kUnavailable &&
        s.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::StrCat("rank ", rank, ": unexpected code: ", s.ToString());
    }
    if (took > kOpTimeout + absl::Seconds(2)) {
      return absl::StrCat("rank ", rank, ": took ", absl::FormatDuration(took), ": ", s.ToString());
    }
    // The communicator is poisoned: later ops fail fast instead of touching the transport, and
    // the (done) Work carries that status.
    std::shared_ptr<Work> after_work = comm.BarrierAsync(CommStream());
    if (!after_work->IsDone()) return absl::StrCat("rank ", rank, ": Work not done on return");
    absl::Status after = after_work->Wait();
    if (after.code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(after.message(), "Barrier #2")) {
      return absl::StrCat("rank ", rank, ": op after failure: ", after.ToString());
    }
    return "";
  };
  std::vector<RankOutcome> outcomes = RunRanks(kSize, absl::Seconds(30), body);
  ASSERT_EQ(outcomes.size(), static_cast<size_t>(kSize));
  for (int r = 0; r + 1 < kSize; ++r) {
    EXPECT_TRUE(outcomes[r].reported && outcomes[r].message == "OK")
        << "rank " << r << ": " << outcomes[r].message << " (wait status "
        << outcomes[r].wait_status << ")";
  }
  EXPECT_TRUE(WIFSIGNALED(outcomes[kSize - 1].wait_status) &&
              WTERMSIG(outcomes[kSize - 1].wait_status) == SIGKILL)
      << "dying rank: " << outcomes[kSize - 1].message;
}

// A rendezvous whose peer never arrives fails within the timeout, naming what it waited for.
TEST(GlooCommunicatorTest, RendezvousWithMissingPeerTimesOut) {
  FakeStore store;
  const absl::Time start = absl::Now();
  auto comm = GlooCommunicator::Create(store, 0, 2, "127.0.0.1", absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "rank 0 of 2")) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "not set within")) << comm.status();
}

TEST(GlooCommunicatorTest, RejectsBadArguments) {
  FakeStore store;
  EXPECT_EQ(GlooCommunicator::Create(store, 2, 2, "127.0.0.1", kOpTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GlooCommunicator::Create(store, 0, 1, "", kOpTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      GlooCommunicator::Create(store, 0, 1, "127.0.0.1", absl::ZeroDuration()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::trainer
