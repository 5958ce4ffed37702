// ctest-labels: gpu;emulated
// The NCCL stand-in with ranks as real processes (fork): every collective and send/recv in
// each data type at 2 and 4 ranks against sums the test computes itself (in double or int64),
// bit-identical results across ranks, grouped send/recv that would deadlock ungrouped, a rank
// killed mid-run and a rank that never arrives (both fail the survivors within the timeout),
// mismatched collectives, and refusal of non-device buffers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Memory every forked rank and the parent see (results, flags).
class SharedMemory {
 public:
  explicit SharedMemory(size_t bytes) : bytes_(bytes) {
    p_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p_, MAP_FAILED);
    std::memset(p_, 0, bytes);
  }
  ~SharedMemory() { munmap(p_, bytes_); }
  char* data() const { return static_cast<char*>(p_); }

 private:
  size_t bytes_;
  void* p_;
};

// Forks `nranks` children running body(rank); returns each child's exit code (or 128 + signal).
std::vector<int> RunRanks(int nranks, const std::function<int(int)>& body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int code = body(r);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(nranks, -1);
  for (int left = nranks; left > 0; --left) {  // Reap in any order, so a killed rank is not a
    int status = 0;                            // zombie while its peers wait for it.
    const pid_t pid = waitpid(-1, &status, 0);
    for (int r = 0; r < nranks; ++r) {
      if (pids[r] == pid) {
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
  }
  return codes;
}

#define RANK_CHECK(cond, ...)                                             \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
      return 1;                                                           \
    }                                                                     \
  } while (0)

ncclUniqueId NewId() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  return id;
}

template <typename T>
T* Upload(const std::vector<T>& h) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(1, h.size()) * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> Download(const T* p, size_t n) {
  std::vector<T> h(n);
  cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}

// ---- Per-type inputs and the independent reference ------------------------------------------

// Input element i of rank r, as a double (exactly representable in every type used with it).
double InputValue(ncclDataType_t t, int r, size_t i) {
  switch (t) {
    case ncclInt8:
      return static_cast<double>(static_cast<int>((r * 53 + i * 29) % 256) - 128);
    case ncclUint8:
      return static_cast<double>((r * 53 + i * 29 + 7) % 256);
    case ncclInt32:
      return static_cast<double>(static_cast<int64_t>(r * 1000003 + i * 7919) % 2000000000 -
                                 1000000000);
    default: {  // Floats: varied magnitudes, so the order of addition shows in the low bits.
      const double v = std::sin(1.3 * i + 0.7 * r) * std::pow(2.0, static_cast<int>(i % 7) - 3);
      return v;
    }
  }
}

size_t Bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    default:
      return 4;
  }
}

// Stores `v` as type t at index i (floats rounded to nearest even).
void Put(ncclDataType_t t, void* p, size_t i, double v) {
  switch (t) {
    case ncclInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int64_t>(v) & 0xff);
      break;
    case ncclUint8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int64_t>(v) & 0xff);
      break;
    case ncclInt32:
      static_cast<int32_t*>(p)[i] =
          static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v)));
      break;
    case ncclFloat16:
      static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v));
      break;
    case ncclBfloat16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
    default:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
  }
}

double Get(ncclDataType_t t, const void* p, size_t i) {
  switch (t) {
    case ncclInt8:
      return static_cast<const int8_t*>(p)[i];
    case ncclUint8:
      return static_cast<const uint8_t*>(p)[i];
    case ncclInt32:
      return static_cast<const int32_t*>(p)[i];
    case ncclFloat16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case ncclBfloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Rank r's input of n elements as stored bytes.
std::vector<char> Input(ncclDataType_t t, int r, size_t n, size_t offset = 0) {
  std::vector<char> v(n * Bytes(t));
  for (size_t i = 0; i < n; ++i) Put(t, v.data(), i, InputValue(t, r, offset + i));
  return v;
}

// The sum over ranks of element i as stored (the stored, i.e. rounded, inputs summed in double;
// integers wrapped to the type's width).
double ExpectedSum(ncclDataType_t t, int nranks, size_t i, double* abs_sum = nullptr) {
  double s = 0, a = 0;
  int64_t si = 0;
  for (int r = 0; r < nranks; ++r) {
    std::vector<char> one(Bytes(t));
    Put(t, one.data(), 0, InputValue(t, r, i));
    s += Get(t, one.data(), 0);
    a += std::fabs(Get(t, one.data(), 0));
    si += static_cast<int64_t>(Get(t, one.data(), 0));
  }
  if (abs_sum != nullptr) *abs_sum = a;
  switch (t) {
    case ncclInt8:
      return static_cast<int8_t>(si & 0xff);
    case ncclUint8:
      return static_cast<uint8_t>(si & 0xff);
    case ncclInt32:
      return static_cast<int32_t>(static_cast<uint32_t>(si));
    default:
      return s;
  }
}

// Whether `got` is the sum: exact for integers; for floats within one unit in the last place of
// the type (its rounding of the result) plus fp32 accumulation error over `abs_sum`.
bool SumMatches(ncclDataType_t t, double got, double want, double abs_sum, int nranks) {
  double ulp = 0;
  switch (t) {
    case ncclFloat16:
      ulp = std::ldexp(1.0, -10);
      break;
    case ncclBfloat16:
      ulp = std::ldexp(1.0, -7);
      break;
    case ncclFloat32:
      ulp = std::ldexp(1.0, -23);
      break;
    default:
      return got == want;
  }
  return std::fabs(got - want) <= ulp * std::fabs(want) + nranks * std::ldexp(1.0, -23) * abs_sum;
}

const ncclDataType_t kTypes[] = {ncclFloat32, ncclBfloat16, ncclFloat16,
                                 ncclInt8,    ncclUint8,    ncclInt32};

// Every collective in every type, and a send/recv ring. `results` receives each rank's
// all-reduce output (fp32) for the determinism check.
int AllCollectives(int rank, int nranks, const ncclUniqueId& id, char* results, size_t n) {
  ncclComm_t comm;
  RANK_CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init: %s",
             ncclGetLastError(nullptr));
  int v = 0;
  RANK_CHECK(ncclCommCount(comm, &v) == ncclSuccess && v == nranks, "ncclCommCount %d", v);
  RANK_CHECK(ncclCommUserRank(comm, &v) == ncclSuccess && v == rank, "ncclCommUserRank %d", v);
  for (ncclDataType_t t : kTypes) {
    const size_t es = Bytes(t);
    // All-reduce, out of place and in place.
    {
      char* send = Upload(Input(t, rank, n));
      char* recv = Upload(std::vector<char>(n * es));
      RANK_CHECK(ncclAllReduce(send, recv, n, t, ncclSum, comm, nullptr) == ncclSuccess,
                 "all-reduce type %d: %s", t, ncclGetLastError(comm));
      RANK_CHECK(ncclAllReduce(send, send, n, t, ncclSum, comm, nullptr) == ncclSuccess,
                 "in-place all-reduce type %d", t);
      const auto out = Download(recv, n * es), in_place = Download(send, n * es);
      for (size_t i = 0; i < n; ++i) {
        double abs_sum = 0;
        const double want = ExpectedSum(t, nranks, i, &abs_sum);
        RANK_CHECK(SumMatches(t, Get(t, out.data(), i), want, abs_sum, nranks),
                   "all-reduce type %d element %zu: got %.9g want %.9g", t, i,
                   Get(t, out.data(), i), want);
      }
      RANK_CHECK(in_place == out, "in-place all-reduce type %d differs from out-of-place", t);
      if (t == ncclFloat32) std::memcpy(results + rank * n * 4, out.data(), n * 4);
      cudaFree(send), cudaFree(recv);
    }
    // Max.
    {
      char* buf = Upload(Input(t, rank, n));
      RANK_CHECK(ncclAllReduce(buf, buf, n, t, ncclMax, comm, nullptr) == ncclSuccess, "max");
      const auto out = Download(buf, n * es);
      for (size_t i = 0; i < n; ++i) {
        double want = -1e300;
        for (int r = 0; r < nranks; ++r) {
          want = std::max(want, Get(t, Input(t, r, 1, i).data(), 0));
        }
        RANK_CHECK(Get(t, out.data(), i) == want, "max type %d element %zu", t, i);
      }
      cudaFree(buf);
    }
    // Reduce-scatter: rank r gets block r of the sum of everyone's nranks*n inputs.
    {
      char* send = Upload(Input(t, rank, n * nranks));
      char* recv = Upload(std::vector<char>(n * es));
      RANK_CHECK(ncclReduceScatter(send, recv, n, t, ncclSum, comm, nullptr) == ncclSuccess,
                 "reduce-scatter type %d", t);
      const auto out = Download(recv, n * es);
      for (size_t i = 0; i < n; ++i) {
        double abs_sum = 0;
        const double want = ExpectedSum(t, nranks, rank * n + i, &abs_sum);
        RANK_CHECK(SumMatches(t, Get(t, out.data(), i), want, abs_sum, nranks),
                   "reduce-scatter type %d element %zu", t, i);
      }
      cudaFree(send), cudaFree(recv);
    }
    // All-gather: block r of the output is rank r's input, bit for bit.
    {
      char* send = Upload(Input(t, rank, n));
      char* recv = Upload(std::vector<char>(n * es * nranks));
      RANK_CHECK(ncclAllGather(send, recv, n, t, comm, nullptr) == ncclSuccess, "all-gather");
      const auto out = Download(recv, n * es * nranks);
      for (int r = 0; r < nranks; ++r) {
        RANK_CHECK(std::memcmp(out.data() + r * n * es, Input(t, r, n).data(), n * es) == 0,
                   "all-gather type %d block %d", t, r);
      }
      cudaFree(send), cudaFree(recv);
    }
    // Broadcast from the last rank, in place.
    {
      const int root = nranks - 1;
      char* buf = Upload(rank == root ? Input(t, rank, n) : std::vector<char>(n * es, 0));
      RANK_CHECK(ncclBroadcast(buf, buf, n, t, root, comm, nullptr) == ncclSuccess, "broadcast");
      RANK_CHECK(Download(buf, n * es) == Input(t, root, n), "broadcast type %d", t);
      cudaFree(buf);
    }
    // Ring: send to rank+1, receive from rank-1, grouped.
    {
      char* send = Upload(Input(t, rank, n));
      char* recv = Upload(std::vector<char>(n * es));
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      RANK_CHECK(ncclSend(send, n, t, (rank + 1) % nranks, comm, nullptr) == ncclSuccess, "send");
      RANK_CHECK(ncclRecv(recv, n, t, (rank + nranks - 1) % nranks, comm, nullptr) == ncclSuccess,
                 "recv");
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", ncclGetLastError(comm));
      RANK_CHECK(Download(recv, n * es) == Input(t, (rank + nranks - 1) % nranks, n),
                 "ring type %d", t);
      cudaFree(send), cudaFree(recv);
    }
  }
  ncclResult_t async = ncclInternalError;
  RANK_CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess,
             "async error %d", async);
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return 0;
}

class NcclEmuTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    // Small staging slots, so every collective here runs in several chunks.
    setenv("NCCL_EMU_SLOT_BYTES", "1024", 1);
    setenv("NCCL_EMU_TIMEOUT_S", "20", 1);
  }
};

TEST_P(NcclEmuTest, EveryCollectiveInEveryTypeMatchesTheSumAndIsBitIdenticalAcrossRanks) {
  const int nranks = GetParam();
  const size_t n = 1001;  // Odd, and several slots' worth.
  SharedMemory results(nranks * n * 4);
  const ncclUniqueId id = NewId();
  const auto codes = RunRanks(
      nranks, [&](int rank) { return AllCollectives(rank, nranks, id, results.data(), n); });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  // Rank-order reduction: every rank holds the same bits.
  for (int r = 1; r < nranks; ++r) {
    EXPECT_EQ(std::memcmp(results.data(), results.data() + r * n * 4, n * 4), 0) << "rank " << r;
  }
  // And the fp32 sums really depend on the order (so the check above can fail): summing the
  // ranks in reverse order changes some bits.
  bool order_matters = false;
  for (size_t i = 0; i < n && nranks > 2; ++i) {
    float fwd = 0, rev = 0;
    for (int r = 0; r < nranks; ++r) fwd += static_cast<float>(InputValue(ncclFloat32, r, i));
    for (int r = nranks - 1; r >= 0; --r) rev += static_cast<float>(InputValue(ncclFloat32, r, i));
    order_matters |= fwd != rev;
  }
  if (nranks > 2) {
    EXPECT_TRUE(order_matters);
  }
  // Nothing is left in /dev/shm.
  std::string name(id.internal + 8);
  EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0) << name << " was not unlinked";
}

// Every rank sends a multi-slot message to every other rank and receives from each: ungrouped
// and blocking this would deadlock on the first send; grouped it completes.
TEST_P(NcclEmuTest, GroupedSendRecvToEveryPeerCompletes) {
  const int nranks = GetParam();
  const size_t n = 3000;  // bytes per peer: several point-to-point slots.
  const ncclUniqueId id = NewId();
  const auto codes = RunRanks(nranks, [&](int rank) {
    ncclComm_t comm;
    RANK_CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
    std::vector<char> in(n * nranks);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(rank * 31 + i * 7);
    char* send = Upload(in);
    char* recv = Upload(std::vector<char>(n * nranks, 0));
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int p = 0; p < nranks; ++p) {
      RANK_CHECK(ncclSend(send + p * n, n, ncclUint8, p, comm, nullptr) == ncclSuccess, "send");
      RANK_CHECK(ncclRecv(recv + p * n, n, ncclUint8, p, comm, nullptr) == ncclSuccess, "recv");
    }
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", ncclGetLastError(comm));
    const auto out = Download(recv, n * nranks);
    for (int p = 0; p < nranks; ++p) {
      for (size_t i = 0; i < n; ++i) {
        RANK_CHECK(out[p * n + i] == static_cast<char>(p * 31 + (rank * n + i) * 7),
                   "byte %zu from rank %d", i, p);
      }
    }
    ncclCommDestroy(comm);
    return 0;
  });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclEmuTest, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// The last of four ranks is SIGKILLed after one all-reduce; the survivors' next all-reduce
// fails with ncclRemoteError naming it, well within the timeout, and the error stays.
TEST(NcclEmuFaultTest, KilledRankFailsTheSurvivorsNextCollective) {
  setenv("NCCL_EMU_TIMEOUT_S", "10", 1);
  const int nranks = 4;
  const ncclUniqueId id = NewId();
  const auto codes = RunRanks(nranks, [&](int rank) {
    ncclComm_t comm;
    RANK_CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
    float* buf = Upload(std::vector<float>(64, 1.0f));
    RANK_CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess,
               "first all-reduce");
    if (rank == nranks - 1) raise(SIGKILL);
    const auto start = Clock::now();
    const ncclResult_t r = ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, comm, nullptr);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    RANK_CHECK(r == ncclRemoteError, "second all-reduce returned %d, want ncclRemoteError", r);
    RANK_CHECK(took < 9.0, "failed only after %.1fs", took);
    const std::string last = ncclGetLastError(comm);
    RANK_CHECK(last.find("rank 3") != std::string::npos, "error does not name rank 3: %s",
               last.c_str());
    ncclResult_t async = ncclSuccess;
    RANK_CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclRemoteError,
               "async error %d", async);
    RANK_CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, comm, nullptr) == ncclRemoteError,
               "the communicator is not poisoned");
    RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
    return 0;
  });
  for (int r = 0; r < nranks - 1; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  EXPECT_EQ(codes[nranks - 1], 128 + SIGKILL);
}

// A peer that stays alive but never joins the collective: the waiting rank gives up after
// NCCL_EMU_TIMEOUT_S, not sooner and not never.
TEST(NcclEmuFaultTest, SilentPeerTimesOut) {
  setenv("NCCL_EMU_TIMEOUT_S", "1", 1);
  SharedMemory done(4);
  const ncclUniqueId id = NewId();
  const auto codes = RunRanks(2, [&](int rank) {
    ncclComm_t comm;
    RANK_CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init");
    if (rank == 1) {
      while (__atomic_load_n(done.data(), __ATOMIC_ACQUIRE) == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ncclCommDestroy(comm);
      return 0;
    }
    float* buf = Upload(std::vector<float>(8, 1.0f));
    const auto start = Clock::now();
    const ncclResult_t r = ncclAllReduce(buf, buf, 8, ncclFloat32, ncclSum, comm, nullptr);
    const double took = std::chrono::duration<double>(Clock::now() - start).count();
    __atomic_store_n(done.data(), 1, __ATOMIC_RELEASE);
    RANK_CHECK(r == ncclRemoteError, "got %d, want ncclRemoteError", r);
    RANK_CHECK(took >= 0.9 && took < 5.0, "gave up after %.2fs, timeout 1s", took);
    const std::string last = ncclGetLastError(comm);
    RANK_CHECK(last.find("NCCL_EMU_TIMEOUT_S") != std::string::npos, "%s", last.c_str());
    ncclCommAbort(comm);
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(NcclEmuFaultTest, MismatchedCollectivesAreReported) {
  setenv("NCCL_EMU_TIMEOUT_S", "10", 1);
  const ncclUniqueId id = NewId();
  const auto codes = RunRanks(2, [&](int rank) {
    ncclComm_t comm;
    RANK_CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init");
    float* buf = Upload(std::vector<float>(32, 1.0f));
    const ncclResult_t r = rank == 0
                               ? ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, nullptr)
                               : ncclBroadcast(buf, buf, 16, ncclFloat32, 0, comm, nullptr);
    RANK_CHECK(r == ncclInvalidUsage, "got %d, want ncclInvalidUsage", r);
    ncclCommAbort(comm);
    return 0;
  });
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 0);
}

TEST(NcclEmuSingleRankTest, RefusesBuffersOutsideDeviceAllocationsWithoutPoisoning) {
  ncclComm_t comm;
  const ncclUniqueId id = NewId();
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  float* dev = Upload(std::vector<float>(16, 2.0f));
  std::vector<float> host(16, 1.0f);
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, comm, nullptr),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("not device memory"), std::string::npos)
      << ncclGetLastError(comm);
  EXPECT_EQ(ncclAllReduce(dev, dev, 17, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument)
      << "one element past the allocation";
  EXPECT_EQ(ncclAllGather(dev, dev + 8, 9, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(host.data(), 16, ncclFloat32, 0, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(dev, dev, 8, ncclFloat64, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(dev, dev, 8, ncclFloat32, ncclProd, comm, nullptr), ncclInvalidArgument);
  // The communicator still works.
  ASSERT_EQ(ncclAllReduce(dev, dev, 16, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(Download(dev, 16), std::vector<float>(16, 2.0f));
  cudaFree(dev);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
