// NcclCommunicator on real GPUs: every collective on device buffers at world size 1 (copied
// back and compared), typed operations ordered on a caller's stream, rebuilding on a fresh
// PrefixStore, argument checking, bounded rendezvous and initialisation, and (with two or more
// GPUs) two ranks in two threads on two devices, including a collective that one rank never joins.
// The whole binary exits 77 (CTest "skipped") where no CUDA device exists.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer/comm/comm_queue.h"
#include "trainer/comm/nccl_communicator.h"
#include "trainer/comm/store.h"
#include "trainer/cuda/device_array.h"

namespace ringmaster::trainer {
namespace {

// Generous: the first NCCL initialisation in a process can take seconds.
constexpr absl::Duration kTimeout = absl::Seconds(60);

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<float> Ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i) + offset;
  return v;
}

std::vector<uint8_t> Bytes(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return v;
}

// At world size 1 every collective is the identity (a gather/scatter of one block), so each
// result must equal its input bit for bit.
void ExpectIdentityOps(Communicator& comm) {
  const std::vector<float> x = Ramp(1000, 0.5f, -3.0f);
  {
    DeviceArray<float> d(x);
    ASSERT_TRUE(comm.AllReduceSum(d.p, x.size()).ok());
    EXPECT_EQ(d.Download(), x);
  }
  {
    DeviceArray<float> in(x), out(x.size());
    ASSERT_TRUE(comm.ReduceScatterSum(in.p, out.p, x.size()).ok());
    EXPECT_EQ(out.Download(), x);
  }
  {
    DeviceArray<float> in(x), out(x.size());
    ASSERT_TRUE(comm.AllGather(in.p, out.p, x.size()).ok());
    EXPECT_EQ(out.Download(), x);
  }
  const std::vector<uint8_t> b = Bytes(257, 1);  // Odd size: no alignment assumptions.
  {
    DeviceArray<uint8_t> in(b), out(b.size());
    ASSERT_TRUE(comm.AllToAll(in.p, out.p, b.size()).ok());
    EXPECT_EQ(out.Download(), b);
  }
  {
    DeviceArray<uint8_t> in(b), out(b.size());
    ASSERT_TRUE(comm.AllGatherBytes(in.p, out.p, b.size()).ok());
    EXPECT_EQ(out.Download(), b);
  }
  {
    DeviceArray<float> d(x);
    ASSERT_TRUE(comm.Broadcast(d.p, x.size(), 0).ok());
    EXPECT_EQ(d.Download(), x);
  }
  EXPECT_TRUE(comm.Barrier().ok());
}

TEST(NcclCommunicatorTest, SingleRankOpsReturnTheirInput) {
  FakeStore store;
  auto comm = NcclCommunicator::Create(store, 0, 1, 0, kTimeout);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->size(), 1);
  ExpectIdentityOps(**comm);
  // Empty operations succeed without touching their (null) buffers.
  EXPECT_TRUE((*comm)->AllReduceSum(nullptr, 0).ok());
  EXPECT_TRUE((*comm)->AllGather(nullptr, nullptr, 0).ok());
  EXPECT_TRUE((*comm)->AllToAll(nullptr, nullptr, 0).ok());
}

// Typed operations enqueued on a caller's stream: each is ordered after the upload already on
// that stream, the download queued after it sees its result, and its Work completes (by event)
// without the stream being synchronised by the communicator. At world size 1 every result
// equals its input; kBytes cannot be summed.
TEST(NcclCommunicatorTest, TypedOpsOnACallerStreamCompleteByEvent) {
  FakeStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, kTimeout);
  ASSERT_TRUE(created.ok()) << created.status();
  Communicator& comm = **created;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const CommStream on(stream);

  // 777 16-bit elements (or 1554 int8): codes below 0x4000, finite and positive as bf16 and as
  // fp16, so that even a sum computed at world size 1 returns them bit for bit.
  std::vector<uint8_t> x(2 * 777);
  for (size_t i = 0; i < 777; ++i) {
    const uint16_t code = static_cast<uint16_t>((i * 37) & 0x3fff);
    std::memcpy(&x[2 * i], &code, 2);
  }
  for (DataType t : {DataType::kBFloat16, DataType::kFloat16, DataType::kInt8}) {
    SCOPED_TRACE(DataTypeName(t));
    const size_t count = x.size() / DataTypeSize(t);
    DeviceArray<uint8_t> d(x.size()), out(x.size());
    std::vector<uint8_t> back(x.size(), 0);
    ASSERT_EQ(cudaMemcpyAsync(d.p, x.data(), x.size(), cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    std::shared_ptr<Work> reduce = comm.AllReduceSumAsync(d.p, count, t, on);
    std::shared_ptr<Work> gather = comm.AllGatherAsync(d.p, out.p, count, t, on);
    ASSERT_EQ(cudaMemcpyAsync(back.data(), out.p, x.size(), cudaMemcpyDeviceToHost, stream),
              cudaSuccess);
    EXPECT_TRUE(reduce->Wait().ok());
    EXPECT_TRUE(gather->Wait().ok());
    EXPECT_TRUE(reduce->IsDone());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(back, x);

    std::shared_ptr<Work> scatter = comm.ReduceScatterSumAsync(d.p, out.p, count, t, on);
    EXPECT_TRUE(scatter->Wait().ok());
    EXPECT_EQ(out.Download(), x);
    std::shared_ptr<Work> bcast = comm.BroadcastAsync(d.p, count, t, 0, on);
    std::shared_ptr<Work> a2a = comm.AllToAllAsync(d.p, out.p, count, t, on);
    EXPECT_TRUE(bcast->Wait().ok());
    EXPECT_TRUE(a2a->Wait().ok());
    EXPECT_EQ(out.Download(), x);
  }
  DeviceArray<uint8_t> d(x);
  std::shared_ptr<Work> bad = comm.AllReduceSumAsync(d.p, x.size(), DataType::kBytes, on);
  EXPECT_TRUE(bad->IsDone());
  EXPECT_EQ(bad->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(comm.BarrierAsync(on)->Wait().ok());  // an argument error does not poison
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(NcclCommunicatorTest, PublishesTheUniqueIdUnderItsKey) {
  FakeStore store;
  auto comm = NcclCommunicator::Create(store, 0, 1, 0, kTimeout);
  ASSERT_TRUE(comm.ok()) << comm.status();
  absl::StatusOr<std::string> id = store.Get("nccl_unique_id", absl::ZeroDuration());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), sizeof(ncclUniqueId));
}

TEST(NcclCommunicatorTest, WorksFromAnotherThreadThroughCommQueue) {
  FakeStore store;
  auto comm = NcclCommunicator::Create(store, 0, 1, 0, kTimeout);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const std::vector<float> x = Ramp(4096, 1.0f, 0.0f);
  DeviceArray<float> d(x);
  CommQueue queue;  // Its worker thread has never selected a device.
  std::shared_ptr<Work> reduce = queue.Submit([&] { return (*comm)->AllReduceSum(d.p, x.size()); });
  std::shared_ptr<Work> barrier = queue.Submit([&] { return (*comm)->Barrier(); });
  EXPECT_TRUE(reduce->Wait().ok());
  EXPECT_TRUE(barrier->Wait().ok());
  EXPECT_EQ(d.Download(), x);
}

TEST(NcclCommunicatorTest, RebuildsOnAFreshPrefixStore) {
  FakeStore base;
  {
    PrefixStore gen0("gen0/", base);
    auto comm = NcclCommunicator::Create(gen0, 0, 1, 0, kTimeout);
    ASSERT_TRUE(comm.ok()) << comm.status();
    ExpectIdentityOps(**comm);
  }
  PrefixStore gen1("gen1/", base);
  auto comm1 = NcclCommunicator::Create(gen1, 0, 1, 0, kTimeout);
  ASSERT_TRUE(comm1.ok()) << comm1.status();
  // A third generation while the second is still alive: independent communicators coexist.
  PrefixStore gen2("gen2/", base);
  auto comm2 = NcclCommunicator::Create(gen2, 0, 1, 0, kTimeout);
  ASSERT_TRUE(comm2.ok()) << comm2.status();
  ExpectIdentityOps(**comm1);
  ExpectIdentityOps(**comm2);

  absl::StatusOr<std::string> id0 = base.Get("gen0/nccl_unique_id", absl::ZeroDuration());
  absl::StatusOr<std::string> id1 = base.Get("gen1/nccl_unique_id", absl::ZeroDuration());
  ASSERT_TRUE(id0.ok() && id1.ok());
  EXPECT_NE(*id0, *id1);
}

TEST(NcclCommunicatorTest, RejectsBadCreateArguments) {
  FakeStore store;
  auto expect_invalid = [&](int rank, int size, int device, absl::Duration timeout) {
    auto comm = NcclCommunicator::Create(store, rank, size, device, timeout);
    EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument)
        << "rank " << rank << " size " << size << " device " << device << ": " << comm.status();
  };
  expect_invalid(-1, 1, 0, kTimeout);
  expect_invalid(1, 1, 0, kTimeout);
  expect_invalid(0, 0, 0, kTimeout);
  expect_invalid(0, 1, -1, kTimeout);
  expect_invalid(0, 1, DeviceCount(), kTimeout);
  expect_invalid(0, 1, 0, absl::ZeroDuration());
  expect_invalid(0, 1, 0, absl::Seconds(-1));
}

TEST(NcclCommunicatorTest, RejectsBadBuffersWithoutPoisoning) {
  FakeStore store;
  auto created = NcclCommunicator::Create(store, 0, 1, 0, kTimeout);
  ASSERT_TRUE(created.ok()) << created.status();
  Communicator& comm = **created;

  DeviceArray<float> d(Ramp(8, 1.0f, 0.0f));
  std::vector<float> host(8, 1.0f);
  auto expect_invalid = [](const absl::Status& s, const char* what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
  };
  expect_invalid(comm.Broadcast(d.p, 8, 1), "root == size");
  expect_invalid(comm.Broadcast(d.p, 8, -1), "negative root");
  expect_invalid(comm.AllReduceSum(nullptr, 8), "null buffer");
  const absl::Status host_status = comm.AllReduceSum(host.data(), host.size());
  expect_invalid(host_status, "host buffer");
  EXPECT_TRUE(absl::StrContains(host_status.message(), "device pointer")) << host_status;
  expect_invalid(comm.AllGather(d.p, d.p, 4), "in == out");
  expect_invalid(comm.ReduceScatterSum(d.p, d.p + 1, 4), "overlapping in/out");
  expect_invalid(comm.AllToAll(d.p, host.data(), 8), "host out");

  // None of that reached NCCL, so the communicator still works.
  ExpectIdentityOps(comm);
}

TEST(NcclCommunicatorTest, RendezvousTimesOutWithoutRankZero) {
  FakeStore store;  // Rank 0 never publishes the id.
  const absl::Time start = absl::Now();
  auto comm = NcclCommunicator::Create(store, 1, 2, 0, absl::Milliseconds(300));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "nccl_unique_id")) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "rank 1 of 2")) << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(NcclCommunicatorTest, InitTimesOutWhenAPeerNeverJoins) {
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
  GTEST_SKIP() << "NCCL < 2.14: initialisation is blocking and cannot be bounded";
#endif
  FakeStore store;  // Rank 0 of 2 publishes its id; rank 1 never comes.
  const absl::Time start = absl::Now();
  auto comm = NcclCommunicator::Create(store, 0, 2, 0, absl::Seconds(2));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "initialisation")) << comm.status();
  // The deadline plus the abort, not a hang.
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

// Runs `body(rank, comm)` for ranks 0 and 1 on devices 0 and 1, in two threads that create their
// communicators concurrently (initialisation is collective). Returns each rank's error text.
std::vector<std::string> RunTwoRanks(absl::Duration timeout,
                                     const std::function<std::string(int, Communicator&)>& body) {
  FakeStore store;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      if (cudaSetDevice(r) != cudaSuccess) {
        errors[r] = "cudaSetDevice failed";
        return;
      }
      auto comm = NcclCommunicator::Create(store, r, 2, r, timeout);
      errors[r] = comm.ok() ? body(r, **comm) : comm.status().ToString();
    });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

TEST(NcclCommunicatorTest, TwoRanksOnTwoDevices) {
  if (DeviceCount() < 2) {
    GTEST_SKIP() << "needs 2 CUDA devices (NCCL does not allow two ranks of one communicator "
                    "on the same GPU); found "
                 << DeviceCount();
  }
  constexpr size_t n = 1024;  // Floats per rank block.
  constexpr size_t b = 300;   // Bytes per rank block.
  std::vector<std::string> errors = RunTwoRanks(kTimeout, [&](int r, Communicator& comm) {
    std::string err;
    auto check = [&](bool ok, const std::string& what) {
      if (!ok && err.empty()) err = absl::StrCat("rank ", r, ": ", what);
    };
    // Small integers: exact in float whatever order NCCL adds them in.
    {
      DeviceArray<float> d(Ramp(n, static_cast<float>(r + 1), 0.0f));
      check(comm.AllReduceSum(d.p, n).ok(), "AllReduceSum failed");
      check(d.Download() == Ramp(n, 3.0f, 0.0f), "AllReduceSum result");
    }
    {
      DeviceArray<float> in(Ramp(2 * n, 1.0f, 1000.0f * static_cast<float>(r))), out(n);
      check(comm.ReduceScatterSum(in.p, out.p, n).ok(), "ReduceScatterSum failed");
      // Block r of the sum: (r*n + i) + (1000 + r*n + i).
      check(out.Download() == Ramp(n, 2.0f, 1000.0f + 2.0f * static_cast<float>(r * n)),
            "ReduceScatterSum result");
    }
    {
      DeviceArray<float> in(Ramp(n, 1.0f, 100000.0f * static_cast<float>(r))), out(2 * n);
      check(comm.AllGather(in.p, out.p, n).ok(), "AllGather failed");
      std::vector<float> want = Ramp(n, 1.0f, 0.0f);
      const std::vector<float> second = Ramp(n, 1.0f, 100000.0f);
      want.insert(want.end(), second.begin(), second.end());
      check(out.Download() == want, "AllGather result");
    }
    {
      // Block j of rank r's input is Bytes(b, 10*r + j); rank r receives block r of every rank.
      std::vector<uint8_t> in_host = Bytes(b, 10 * r + 0);
      const std::vector<uint8_t> in1 = Bytes(b, 10 * r + 1);
      in_host.insert(in_host.end(), in1.begin(), in1.end());
      DeviceArray<uint8_t> in(in_host), out(2 * b);
      check(comm.AllToAll(in.p, out.p, b).ok(), "AllToAll failed");
      std::vector<uint8_t> want = Bytes(b, 10 * 0 + r);
      const std::vector<uint8_t> from1 = Bytes(b, 10 * 1 + r);
      want.insert(want.end(), from1.begin(), from1.end());
      check(out.Download() == want, "AllToAll result");
    }
    {
      DeviceArray<uint8_t> in(Bytes(b, r)), out(2 * b);
      check(comm.AllGatherBytes(in.p, out.p, b).ok(), "AllGatherBytes failed");
      std::vector<uint8_t> want = Bytes(b, 0);
      const std::vector<uint8_t> from1 = Bytes(b, 1);
      want.insert(want.end(), from1.begin(), from1.end());
      check(out.Download() == want, "AllGatherBytes result");
    }
    {
      DeviceArray<float> d(r == 1 ? Ramp(n, 1.0f, 7.0f) : std::vector<float>(n, -1.0f));
      check(comm.Broadcast(d.p, n, 1).ok(), "Broadcast failed");
      check(d.Download() == Ramp(n, 1.0f, 7.0f), "Broadcast result");
    }
    check(comm.Barrier().ok(), "Barrier failed");
    return err;
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(NcclCommunicatorTest, CollectiveAPeerSkipsTimesOutAndPoisons) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 CUDA devices; found " << DeviceCount();
  std::atomic<bool> rank0_done{false};
  std::vector<std::string> errors =
      RunTwoRanks(absl::Seconds(3), [&](int r, Communicator& comm) -> std::string {
        if (!comm.Barrier().ok()) return absl::StrCat("rank ", r, ": first Barrier failed");
        if (r == 1) {
          // Never joins the all-reduce; stays alive until rank 0 has given up.
          while (!rank0_done.load()) absl::SleepFor(absl::Milliseconds(10));
          return "";
        }
        DeviceArray<float> d(Ramp(256, 1.0f, 0.0f));
        const absl::Time start = absl::Now();
        const absl::Status s = comm.AllReduceSum(d.p, 256);
        const absl::Duration took = absl::Now() - start;
        const absl::Status after = comm.Barrier();
        rank0_done = true;
        if (s.code() != absl::StatusCode::kDeadlineExceeded) {
          return absl::StrCat("want DeadlineExceeded, got ", s.ToString());
        }
        if (!absl::StrContains(s.message(), "AllReduceSum #1")) {
          return absl::StrCat("error does not name the op and sequence number: ", s.ToString());
        }
        if (took > absl::Seconds(30))
          return absl::StrCat("timed out only after ", absl::FormatDuration(took));
        if (after.code() != absl::StatusCode::kFailedPrecondition) {
          return absl::StrCat("not poisoned: ", after.ToString());
        }
        return "";
      });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

}  // namespace
}  // namespace ringmaster::trainer

// Without a CUDA device the whole binary reports "skipped" to CTest (exit 77, the test's
// SKIP_RETURN_CODE) instead of a row of passes that checked nothing.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (ringmaster::trainer::DeviceCount() == 0) {
    std::fprintf(stderr, "nccl_communicator_gpu_test: no CUDA device; skipping\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
