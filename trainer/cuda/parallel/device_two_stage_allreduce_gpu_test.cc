// ctest-labels: gpu
// DeviceTwoStageAllReduce at 2 and 4 ranks (threads, each with an NcclCommunicator on its own
// device: real NCCL, or the emulator's stand-in with CUDA_EMU_DEVICES=4) against the CPU
// TwoStageAllReduce over an in-memory fake world (as two_stage_allreduce_test), on the same
// inputs: the same data and residual bits on every rank and the same stats, for every codec,
// with and without zero-chunk skipping and error feedback, over 3 successive calls. Skips
// (exit 77) where no CUDA device exists; a world size needs that many devices.
// Bit for bit on a real GPU too (gpu_test_tolerance.h): the codecs round explicitly
// (wire_codec_gpu_test.cc says why), and the owners add decoded blocks in rank order in their
// own kernels, as the CPU does, whatever NCCL's transport.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "trainer/comm/nccl_communicator.h"
#include "trainer/comm/store.h"
#include "trainer/cuda/parallel/device_two_stage_allreduce.h"
#include "trainer/cuda/testing/gpu_test_util.h"
#include "trainer/parallel/two_stage_allreduce.h"

namespace ringmaster::trainer {
namespace {

constexpr int kCalls = 3;
constexpr float kGuard = 12345.0f;  // written past n on the device; must survive every call

// g CPU ranks as threads exchanging buffers in memory (two_stage_allreduce_test's fake world).
class ThreadWorld {
 public:
  explicit ThreadWorld(int g) : g_(g), in_(static_cast<size_t>(g)), barrier_(g) {}
  void Run(const std::function<void(int rank)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < g_; ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }
  AllToAllFn AllToAll(int rank) { return Exchange(rank, static_cast<size_t>(rank)); }
  AllGatherFn AllGather(int rank) { return Exchange(rank, 0); }

 private:
  std::function<absl::Status(const void*, void*, size_t)> Exchange(int rank, size_t block) {
    return [this, rank, block](const void* in, void* out, size_t b) {
      in_[static_cast<size_t>(rank)] = static_cast<const uint8_t*>(in);
      barrier_.arrive_and_wait();
      for (int src = 0; src < g_; ++src) {
        std::memcpy(static_cast<uint8_t*>(out) + static_cast<size_t>(src) * b,
                    in_[static_cast<size_t>(src)] + block * b, b);
      }
      barrier_.arrive_and_wait();
      return absl::OkStatus();
    };
  }
  const int g_;
  std::vector<const uint8_t*> in_;
  std::barrier<> barrier_;
};

struct Case {
  WireCodec codec;
  bool skip;
  bool feedback;
  size_t n;
};

std::vector<Case> Cases(int g) {
  std::vector<Case> cases;
  for (WireCodec c : {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    for (bool skip : {false, true}) {
      for (bool feedback : {true, false}) {
        // n = 1: fewer chunks than ranks; 700: a short last chunk; 5000: 20 chunks.
        for (size_t n : {size_t{1}, size_t{700}, size_t{5000}}) {
          cases.push_back({c, skip, feedback, n});
        }
      }
    }
  }
  // Past the kernels' 2048-block grid (wire_codec.cu's kMaxGrid) for every step at 2 ranks
  // (no skipping: per = 2050 chunks), so that their grid-stride loops run; 4 ranks would add
  // 5 s for less.
  if (g == 2) cases.push_back({WireCodec::kInt8, false, true, 2048 * 256 * 2 + 700});
  return cases;
}

// Rank r's input for call k: normal values scaled by rank, with chunks that exercise skipping
// and int8's special blocks: chunk c % 5 == 2 zero on every rank (skipped); c % 5 == 3 zero but
// on rank 1; c % 5 == 4 zero in the last call only (active through the residual with feedback);
// c % 7 == 6 subnormal only (int8 scale 0); and an inf on rank 0 in call 1.
std::vector<float> Input(int rank, int call, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(1000 * call + 17 * rank + n));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t c = i / 256;
    float v = normal(rng) * static_cast<float>(rank + 1);
    if (c % 5 == 2 || (c % 5 == 3 && rank != 1) || (c % 5 == 4 && call == kCalls - 1)) v = 0.0f;
    if (c % 7 == 6) v = std::bit_cast<float>(static_cast<uint32_t>(1 + rng() % 1000));
    x[i] = v;
  }
  if (rank == 0 && call == 1 && n > 5) x[5] = std::numeric_limits<float>::infinity();
  return x;
}

// What one rank holds after each call.
struct After {
  std::vector<float> data, residual;
  TwoStageStats stats;
};
using Results = std::vector<std::vector<std::vector<After>>>;  // [case][call][rank]

Results RunCpu(int g, const std::vector<Case>& cases) {
  Results out(cases.size(), std::vector<std::vector<After>>(kCalls, std::vector<After>(g)));
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& k = cases[ci];
    ThreadWorld world(g);
    world.Run([&](int r) {
      TwoStageScratch sc;
      std::vector<float> residual(k.n, 0.0f);
      for (int call = 0; call < kCalls; ++call) {
        After& a = out[ci][static_cast<size_t>(call)][static_cast<size_t>(r)];
        a.data = Input(r, call, k.n);
        const absl::Status s = TwoStageAllReduce(k.codec, g, r, a.data.data(), k.n,
                                                 k.feedback ? residual.data() : nullptr, k.skip, sc,
                                                 world.AllToAll(r), world.AllGather(r), &a.stats);
        EXPECT_TRUE(s.ok()) << s;
        a.residual = residual;
      }
    });
  }
  return out;
}

// Device ranks: thread r on device r with its own NcclCommunicator; each runs every case.
// Returns each rank's error text ("" when fine).
std::vector<std::string> RunDevice(int g, const std::vector<Case>& cases, Results& out) {
  out.assign(cases.size(), std::vector<std::vector<After>>(kCalls, std::vector<After>(g)));
  FakeStore store;
  std::vector<std::string> errors(static_cast<size_t>(g));
  std::vector<std::thread> threads;
  auto rank_body = [&](int r) -> std::string {
    if (cudaSetDevice(r) != cudaSuccess) return "cudaSetDevice failed";
    auto comm = NcclCommunicator::Create(store, r, g, r, absl::Seconds(120));
    if (!comm.ok()) return comm.status().ToString();
    cudaStream_t stream = nullptr;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      return "cudaStreamCreate failed";
    }
    std::string err;
    {
      cuda::DeviceTwoStageScratch sc;  // one for every case: buffers grow and are reused
      for (size_t ci = 0; ci < cases.size() && err.empty(); ++ci) {
        const Case& k = cases[ci];
        float* data = nullptr;
        float* residual = nullptr;
        std::vector<float> guards(3, kGuard), zeros(k.n, 0.0f);
        if (cudaMalloc(&data, (k.n + 3) * sizeof(float)) != cudaSuccess ||
            cudaMalloc(&residual, k.n * sizeof(float)) != cudaSuccess ||
            cudaMemcpy(data + k.n, guards.data(), 3 * sizeof(float), cudaMemcpyHostToDevice) !=
                cudaSuccess ||
            cudaMemcpy(residual, zeros.data(), k.n * sizeof(float), cudaMemcpyHostToDevice) !=
                cudaSuccess) {
          return "allocation failed";
        }
        for (int call = 0; call < kCalls && err.empty(); ++call) {
          After& a = out[ci][static_cast<size_t>(call)][static_cast<size_t>(r)];
          const std::vector<float> x = Input(r, call, k.n);
          a.data.resize(k.n + 3);
          a.residual.resize(k.n);
          if (cudaMemcpyAsync(data, x.data(), k.n * sizeof(float), cudaMemcpyHostToDevice,
                              stream) != cudaSuccess) {
            err = "upload failed";
            break;
          }
          const absl::Status s = cuda::DeviceTwoStageAllReduce(k.codec, **comm, data, k.n,
                                                               k.feedback ? residual : nullptr,
                                                               k.skip, sc, stream, &a.stats);
          if (!s.ok()) {
            err = absl::StrCat("call ", call, ": ", s.ToString());
            break;
          }
          if (cudaMemcpyAsync(a.data.data(), data, (k.n + 3) * sizeof(float),
                              cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
              cudaMemcpyAsync(a.residual.data(), residual, k.n * sizeof(float),
                              cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
              cudaStreamSynchronize(stream) != cudaSuccess) {
            err = "download failed";
            break;
          }
          for (size_t i = k.n; i < k.n + 3; ++i) {
            if (a.data[i] != kGuard) err = absl::StrCat("guard past n overwritten at ", i);
          }
          a.data.resize(k.n);
        }
        cudaFree(data);
        cudaFree(residual);
      }
    }
    cudaStreamDestroy(stream);
    return err;
  };
  for (int r = 0; r < g; ++r) {
    threads.emplace_back([&, r] { errors[static_cast<size_t>(r)] = rank_body(r); });
  }
  for (std::thread& t : threads) t.join();
  return errors;
}

std::string Hex(uint32_t bits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", bits);
  return buf;
}

::testing::AssertionResult SameBits(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) {
    return ::testing::AssertionFailure() << "sizes " << want.size() << " vs " << got.size();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(want[i]), b = std::bit_cast<uint32_t>(got[i]);
    if (a != b) {
      return ::testing::AssertionFailure()
             << "first difference at " << i << ": want " << want[i] << " (" << Hex(a) << "), got "
             << got[i] << " (" << Hex(b) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void ExpectDeviceMatchesCpu(int g) {
  if (!cuda::HaveGpu()) GTEST_SKIP() << "no CUDA device";
#ifndef RINGMASTER_HAVE_NCCL
  GTEST_SKIP() << "built without NCCL";
#endif
  if (DeviceCount() < g) {
    GTEST_SKIP() << "needs " << g << " CUDA devices (one per rank); found " << DeviceCount();
  }
  const std::vector<Case> cases = Cases(g);
  const Results cpu = RunCpu(g, cases);
  Results dev;
  const std::vector<std::string> errors = RunDevice(g, cases, dev);
  for (int r = 0; r < g; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;

  size_t skipped_chunks = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& k = cases[ci];
    for (int call = 0; call < kCalls; ++call) {
      for (int r = 0; r < g; ++r) {
        SCOPED_TRACE(::testing::Message()
                     << "g=" << g << " " << WireCodecName(k.codec) << (k.skip ? " skip" : "")
                     << (k.feedback ? " feedback" : "") << " n=" << k.n << " call " << call
                     << " rank " << r);
        const After& want = cpu[ci][static_cast<size_t>(call)][static_cast<size_t>(r)];
        const After& got = dev[ci][static_cast<size_t>(call)][static_cast<size_t>(r)];
        EXPECT_TRUE(SameBits(want.data, got.data));
        EXPECT_TRUE(SameBits(want.residual, got.residual));
        EXPECT_EQ(want.stats.chunks, got.stats.chunks);
        EXPECT_EQ(want.stats.active_chunks, got.stats.active_chunks);
        EXPECT_EQ(want.stats.wire_bytes, got.stats.wire_bytes);
        // Every rank ends with the same bits.
        EXPECT_TRUE(SameBits(dev[ci][static_cast<size_t>(call)][0].data, got.data));
        skipped_chunks += got.stats.chunks - got.stats.active_chunks;
        // Not vacuous: fp32 without feedback is the exact sum in rank order.
        if (k.codec == WireCodec::kNone && !k.feedback) {
          std::vector<float> sum = Input(0, call, k.n);
          for (int s = 1; s < g; ++s) {
            const std::vector<float> x = Input(s, call, k.n);
            for (size_t i = 0; i < k.n; ++i) sum[i] += x[i];
          }
          EXPECT_TRUE(SameBits(sum, got.data));
        }
      }
    }
  }
  EXPECT_GT(skipped_chunks, 0u) << "no case skipped a chunk";
}

TEST(DeviceTwoStageAllReduce, TwoRanksMatchTheCpuBitForBit) { ExpectDeviceMatchesCpu(2); }
TEST(DeviceTwoStageAllReduce, FourRanksMatchTheCpuBitForBit) { ExpectDeviceMatchesCpu(4); }

}  // namespace
}  // namespace ringmaster::trainer
