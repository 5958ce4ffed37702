// One rank of a collective benchmark over GlooCommunicator, reported by nccl-tests' conventions.
//
//   WORLD_SIZE=4 RANK=r MASTER_ADDR=... MASTER_PORT=... RINGMASTER_GLOO_IFACE=<ip>
//     build/trainer/bench_collectives [--min-bytes 1024] [--max-bytes 67108864] [--factor 4]
//       [--warmup 1] [--min-iters 2] [--max-iters 20] [--target-s 1.0]
//       [--ops allreduce,reducescatter,allgather,alltoall] [--link-gbit X] [--json FILE]
//
// Rendezvous is the trainer's: MakeRendezvousStore(DistEnvFromProcess()) (a TCP store hosted by
// rank 0, or RINGMASTER_STORE_DIR), bounded by RINGMASTER_COLLECTIVE_TIMEOUT_S.
//
// For each op and size S (bytes of the op's whole buffer, fp32 elements):
//  - Check first, separately from timing: exact small-integer data whose result is known; every
//    element that differs from it counts as wrong (summed over ranks).
//  - Time: `warmup` iterations, then rank 0 picks the iteration count from its warm-up time
//    (target-s / t_warmup, clamped to [min-iters, max-iters]) and broadcasts it; a barrier, then
//    that many back-to-back iterations. time = the slowest rank's mean per iteration.
//  - algbw = S / time; busbw (nccl-tests): allreduce algbw·2(n-1)/n; reduce-scatter, all-gather
//    and all-to-all algbw·(n-1)/n, S being the total (not per-rank) buffer. busbw is what each
//    rank's link must carry, so it compares directly with the link speed (--link-gbit).
// Rank 0 prints the table and, with --json, writes it as JSON.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "trainer/comm/communicator.h"
#include "trainer/comm/gloo_communicator.h"
#include "trainer/comm/store.h"
#include "trainer/parallel/dist_context.h"
#include "trainer/parallel/dist_env.h"

namespace rt = ringmaster::trainer;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Options {
  size_t min_bytes = 1024, max_bytes = size_t{64} << 20;
  size_t factor = 4;
  int warmup = 1, min_iters = 2, max_iters = 20;
  double target_s = 1.0;
  double link_gbit = 0;  // 0 = unknown: no %link column
  std::vector<std::string> ops = {"allreduce", "reducescatter", "allgather", "alltoall"};
  std::string json_path;
};

// One collective under test: buffers for a total size, the op itself, and its exact check.
class Case {
 public:
  virtual ~Case() = default;
  virtual const char* name() const = 0;
  // Factor from algbw to busbw for n ranks (nccl-tests).
  virtual double BusFactor(int n) const = 0;
  // Allocates for a total buffer of about `bytes` (rounded down to what n ranks divide evenly);
  // returns the bytes actually used.
  virtual size_t Prepare(size_t bytes, int rank, int n) = 0;
  virtual void FillForCheck() = 0;
  virtual absl::Status Run(rt::Communicator& comm) = 0;
  virtual int64_t CountWrong() const = 0;
};

class AllReduceCase : public Case {
 public:
  const char* name() const override { return "allreduce"; }
  double BusFactor(int n) const override { return 2.0 * (n - 1) / n; }
  size_t Prepare(size_t bytes, int rank, int n) override {
    rank_ = rank;
    n_ = n;
    data_.assign(std::max<size_t>(1, bytes / sizeof(float)), 0.0f);
    return data_.size() * sizeof(float);
  }
  // data[i] = rank + 1 + i % 7: the sum n(n+1)/2 + n·(i % 7) is an exact small integer.
  void FillForCheck() override {
    for (size_t i = 0; i < data_.size(); ++i) {
      data_[i] = static_cast<float>(rank_ + 1 + i % 7);
    }
  }
  absl::Status Run(rt::Communicator& comm) override {
    return comm.AllReduceSum(data_.data(), data_.size());
  }
  int64_t CountWrong() const override {
    int64_t wrong = 0;
    for (size_t i = 0; i < data_.size(); ++i) {
      const int want = n_ * (n_ + 1) / 2 + n_ * static_cast<int>(i % 7);
      if (data_[i] != static_cast<float>(want)) {
        ++wrong;
      }
    }
    return wrong;
  }

 private:
  int rank_ = 0, n_ = 1;
  std::vector<float> data_;  // (count)
};

class ReduceScatterCase : public Case {
 public:
  const char* name() const override { return "reducescatter"; }
  double BusFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  size_t Prepare(size_t bytes, int rank, int n) override {
    rank_ = rank;
    n_ = n;
    per_rank_ = std::max<size_t>(1, bytes / sizeof(float) / n);
    in_.assign(per_rank_ * n, 0.0f);
    out_.assign(per_rank_, 0.0f);
    return in_.size() * sizeof(float);
  }
  // Block b, element i of rank r: r + 1 + b + i % 5. Rank b's result: n(n+1)/2 + n·(b + i % 5).
  void FillForCheck() override {
    for (int b = 0; b < n_; ++b) {
      for (size_t i = 0; i < per_rank_; ++i) {
        in_[b * per_rank_ + i] = static_cast<float>(rank_ + 1 + b + static_cast<int>(i % 5));
      }
    }
  }
  absl::Status Run(rt::Communicator& comm) override {
    return comm.ReduceScatterSum(in_.data(), out_.data(), per_rank_);
  }
  int64_t CountWrong() const override {
    int64_t wrong = 0;
    for (size_t i = 0; i < per_rank_; ++i) {
      const int want = n_ * (n_ + 1) / 2 + n_ * (rank_ + static_cast<int>(i % 5));
      if (out_[i] != static_cast<float>(want)) {
        ++wrong;
      }
    }
    return wrong;
  }

 private:
  int rank_ = 0, n_ = 1;
  size_t per_rank_ = 0;
  std::vector<float> in_;   // (n, per_rank)
  std::vector<float> out_;  // (per_rank)
};

class AllGatherCase : public Case {
 public:
  const char* name() const override { return "allgather"; }
  double BusFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  size_t Prepare(size_t bytes, int rank, int n) override {
    rank_ = rank;
    n_ = n;
    per_rank_ = std::max<size_t>(1, bytes / sizeof(float) / n);
    in_.assign(per_rank_, 0.0f);
    out_.assign(per_rank_ * n, 0.0f);
    return out_.size() * sizeof(float);
  }
  // Element i of rank r: 1000·r + i % 1000.
  void FillForCheck() override {
    for (size_t i = 0; i < per_rank_; ++i) {
      in_[i] = static_cast<float>(1000 * rank_ + i % 1000);
    }
    std::fill(out_.begin(), out_.end(), -1.0f);
  }
  absl::Status Run(rt::Communicator& comm) override {
    return comm.AllGather(in_.data(), out_.data(), per_rank_);
  }
  int64_t CountWrong() const override {
    int64_t wrong = 0;
    for (int r = 0; r < n_; ++r) {
      for (size_t i = 0; i < per_rank_; ++i) {
        if (out_[r * per_rank_ + i] != static_cast<float>(1000 * r + i % 1000)) {
          ++wrong;
        }
      }
    }
    return wrong;
  }

 private:
  int rank_ = 0, n_ = 1;
  size_t per_rank_ = 0;
  std::vector<float> in_;   // (per_rank)
  std::vector<float> out_;  // (n, per_rank)
};

class AllToAllCase : public Case {
 public:
  const char* name() const override { return "alltoall"; }
  double BusFactor(int n) const override { return static_cast<double>(n - 1) / n; }
  size_t Prepare(size_t bytes, int rank, int n) override {
    rank_ = rank;
    n_ = n;
    // Whole floats per block, like the fp32 ops, so sizes line up across rows.
    per_rank_ = std::max<size_t>(1, bytes / sizeof(float) / n) * sizeof(float);
    in_.assign(per_rank_ * n, 0);
    out_.assign(per_rank_ * n, 0);
    return in_.size();
  }
  // Byte i of the block rank s sends to rank d: (31·s + 7·d + i) mod 256.
  static uint8_t Pattern(int s, int d, size_t i) {
    return static_cast<uint8_t>((31 * s + 7 * d + i) & 0xff);
  }
  void FillForCheck() override {
    for (int d = 0; d < n_; ++d) {
      for (size_t i = 0; i < per_rank_; ++i) {
        in_[d * per_rank_ + i] = Pattern(rank_, d, i);
      }
    }
    std::fill(out_.begin(), out_.end(), 0);
  }
  absl::Status Run(rt::Communicator& comm) override {
    return comm.AllToAll(in_.data(), out_.data(), per_rank_);
  }
  int64_t CountWrong() const override {
    int64_t wrong = 0;
    for (int s = 0; s < n_; ++s) {
      for (size_t i = 0; i < per_rank_; ++i) {
        if (out_[s * per_rank_ + i] != Pattern(s, rank_, i)) {
          ++wrong;
        }
      }
    }
    return wrong;
  }

 private:
  int rank_ = 0, n_ = 1;
  size_t per_rank_ = 0;       // bytes per block
  std::vector<uint8_t> in_;   // (n, per_rank) bytes
  std::vector<uint8_t> out_;  // (n, per_rank) bytes
};

std::unique_ptr<Case> MakeCase(const std::string& op) {
  if (op == "allreduce") {
    return std::make_unique<AllReduceCase>();
  }
  if (op == "reducescatter") {
    return std::make_unique<ReduceScatterCase>();
  }
  if (op == "allgather") {
    return std::make_unique<AllGatherCase>();
  }
  if (op == "alltoall") {
    return std::make_unique<AllToAllCase>();
  }
  return nullptr;
}

struct Row {
  std::string op;
  size_t bytes = 0;
  int iters = 0;
  double time_s = 0;            // slowest rank's mean per iteration
  double algbw = 0, busbw = 0;  // GB/s (1e9)
  int64_t wrong = 0;
};

// Sum over ranks of one value (exact for counts below 2^24).
absl::StatusOr<double> SumOverRanks(rt::Communicator& comm, double v) {
  float x = static_cast<float>(v);
  RM_RETURN_IF_ERROR(comm.AllReduceSum(&x, 1));
  return static_cast<double>(x);
}

// Largest value over ranks (through an all-gather: the interface has no max-reduction).
absl::StatusOr<double> MaxOverRanks(rt::Communicator& comm, double v) {
  const float x = static_cast<float>(v);
  std::vector<float> all(static_cast<size_t>(comm.size()));
  RM_RETURN_IF_ERROR(comm.AllGather(&x, all.data(), 1));
  return static_cast<double>(*std::max_element(all.begin(), all.end()));
}

absl::StatusOr<Row> Measure(rt::Communicator& comm, Case& c, size_t bytes, const Options& o) {
  const int n = comm.size();
  Row row;
  row.op = c.name();
  row.bytes = c.Prepare(bytes, comm.rank(), n);

  // Check (untimed).
  c.FillForCheck();
  RM_RETURN_IF_ERROR(c.Run(comm));
  RM_ASSIGN_OR_RETURN(const double wrong, SumOverRanks(comm, static_cast<double>(c.CountWrong())));
  row.wrong = static_cast<int64_t>(wrong);

  // Warm-up, then the iteration count from rank 0's warm-up time.
  RM_RETURN_IF_ERROR(comm.Barrier());
  const double w0 = Now();
  for (int i = 0; i < o.warmup; ++i) {
    RM_RETURN_IF_ERROR(c.Run(comm));
  }
  const double per_iter = (Now() - w0) / std::max(1, o.warmup);
  float iters = static_cast<float>(
      std::clamp(static_cast<int>(std::ceil(o.target_s / std::max(per_iter, 1e-7))), o.min_iters,
                 o.max_iters));
  RM_RETURN_IF_ERROR(comm.Broadcast(&iters, 1, /*root=*/0));
  row.iters = static_cast<int>(iters);

  RM_RETURN_IF_ERROR(comm.Barrier());
  const double t0 = Now();
  for (int i = 0; i < row.iters; ++i) {
    RM_RETURN_IF_ERROR(c.Run(comm));
  }
  const double mine = (Now() - t0) / row.iters;
  RM_ASSIGN_OR_RETURN(row.time_s, MaxOverRanks(comm, mine));
  row.algbw = static_cast<double>(row.bytes) / row.time_s / 1e9;
  row.busbw = row.algbw * c.BusFactor(n);
  return row;
}

std::string HumanBytes(size_t b) {
  if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0) {
    return absl::StrCat(b >> 20, " MiB");
  }
  if (b >= 1024 && b % 1024 == 0) {
    return absl::StrCat(b >> 10, " KiB");
  }
  return absl::StrCat(b, " B");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      return false;
    }
    if ((v = next()) == nullptr) {
      std::fprintf(stderr, "bench_collectives: %s needs a value\n", a.c_str());
      return false;
    }
    if (a == "--min-bytes") {
      o->min_bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--max-bytes") {
      o->max_bytes = std::strtoull(v, nullptr, 10);
    } else if (a == "--factor") {
      o->factor = std::strtoull(v, nullptr, 10);
    } else if (a == "--warmup") {
      o->warmup = std::atoi(v);
    } else if (a == "--min-iters") {
      o->min_iters = std::atoi(v);
    } else if (a == "--max-iters") {
      o->max_iters = std::atoi(v);
    } else if (a == "--target-s") {
      o->target_s = std::atof(v);
    } else if (a == "--link-gbit") {
      o->link_gbit = std::atof(v);
    } else if (a == "--json") {
      o->json_path = v;
    } else if (a == "--ops") {
      o->ops = absl::StrSplit(v, ',', absl::SkipEmpty());
    } else {
      std::fprintf(stderr, "bench_collectives: unknown option %s\n", a.c_str());
      return false;
    }
  }
  if (o->min_bytes == 0 || o->max_bytes < o->min_bytes || o->factor < 2 || o->warmup < 0 ||
      o->min_iters < 1 || o->max_iters < o->min_iters || !(o->target_s > 0)) {
    std::fprintf(stderr,
                 "bench_collectives: need 0 < min-bytes <= max-bytes, factor >= 2, "
                 "warmup >= 0, 1 <= min-iters <= max-iters, target-s > 0\n");
    return false;
  }
  for (const std::string& op : o->ops) {
    if (MakeCase(op) == nullptr) {
      std::fprintf(stderr, "bench_collectives: unknown op '%s'\n", op.c_str());
      return false;
    }
  }
  return true;
}

absl::Status Main(const Options& o) {
  RM_ASSIGN_OR_RETURN(const rt::DistEnv env, rt::DistEnvFromProcess());
  const absl::Duration timeout = env.collective_timeout;
  RM_ASSIGN_OR_RETURN(std::unique_ptr<rt::Store> store, rt::MakeRendezvousStore(env, timeout));
  rt::PrefixStore scoped("bench_collectives/", *store);
  const std::string host = env.iface.empty() ? "127.0.0.1" : env.iface;
  RM_ASSIGN_OR_RETURN(
      std::unique_ptr<rt::Communicator> comm,
      rt::GlooCommunicator::Create(scoped, env.rank, env.world_size, host, timeout));
  const int n = comm->size();
  const bool leader = comm->rank() == 0;
  if (leader) {
    std::printf("# bench_collectives: %d ranks, Gloo TCP (rank 0 listens on %s), fp32\n", n,
                host.c_str());
    std::printf(
        "# time = slowest rank's mean per iteration; GB/s = 1e9 B/s; busbw by "
        "nccl-tests' conventions%s\n",
        o.link_gbit > 0 ? absl::StrCat("; %link = busbw / ", o.link_gbit, " Gbit/s").c_str() : "");
    std::printf("%-14s %10s %6s %12s %10s %10s %7s %7s\n", "op", "size", "iters", "time(us)",
                "algbw", "busbw", "%link", "#wrong");
  }
  std::vector<Row> rows;
  int64_t total_wrong = 0;
  for (const std::string& op : o.ops) {
    std::unique_ptr<Case> c = MakeCase(op);
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
      absl::StatusOr<Row> r = Measure(*comm, *c, bytes, o);
      if (!r.ok()) {
        return absl::Status(r.status().code(), absl::StrCat(op, " of ", HumanBytes(bytes), ": ",
                                                            r.status().ToString()));
      }
      total_wrong += r->wrong;
      if (leader) {
        const std::string link =
            o.link_gbit > 0
                ? absl::StrCat(
                      static_cast<int>(std::lround(100.0 * r->busbw / (o.link_gbit / 8.0))), "%")
                : "-";
        std::printf("%-14s %10s %6d %12.1f %10.4f %10.4f %7s %7lld\n", r->op.c_str(),
                    HumanBytes(r->bytes).c_str(), r->iters, r->time_s * 1e6, r->algbw, r->busbw,
                    link.c_str(), static_cast<long long>(r->wrong));
        std::fflush(stdout);
      }
      rows.push_back(*std::move(r));
    }
    // The per-op buffers go before the next op allocates its own.
  }
  if (leader && !o.json_path.empty()) {
    nlohmann::json j = {{"world_size", n},
                        {"iface", host},
                        {"link_gbit", o.link_gbit},
                        {"units", {{"time", "us"}, {"algbw", "GB/s"}, {"busbw", "GB/s"}}},
                        {"rows", nlohmann::json::array()}};
    for (const Row& r : rows) {
      j["rows"].push_back({{"op", r.op},
                           {"bytes", r.bytes},
                           {"iters", r.iters},
                           {"time_us", r.time_s * 1e6},
                           {"algbw_GBps", r.algbw},
                           {"busbw_GBps", r.busbw},
                           {"wrong", r.wrong}});
    }
    std::ofstream f(o.json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      return absl::InternalError(absl::StrCat("cannot write ", o.json_path));
    }
  }
  RM_RETURN_IF_ERROR(comm->Barrier());  // rank 0's store outlives every rank's last use
  if (total_wrong > 0) {
    return absl::DataLossError(absl::StrCat(total_wrong, " wrong values (see #wrong)"));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: bench_collectives [--min-bytes B] [--max-bytes B] [--factor F] "
                 "[--warmup N] [--min-iters N] [--max-iters N] [--target-s S] "
                 "[--ops allreduce,reducescatter,allgather,alltoall] [--link-gbit X] "
                 "[--json FILE]\n");
    return 2;
  }
  absl::Status s;
  try {
    s = Main(o);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc for the 64 MiB buffers
    s = absl::InternalError(e.what());
  }
  if (!s.ok()) {
    std::fprintf(stderr, "bench_collectives: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
