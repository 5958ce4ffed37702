// PlanRanks: topology order, contiguous rank blocks, precision/compression by compute
// capability, throughput weights, the torchrun environment (checked with the trainer's own
// parser), refusals, and the structure of a 4096-node x 8-GPU plan.
#include "coordinator/plan/planner.h"

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/plan_vars.h"
#include "trainer/parallel/dist_env.h"

namespace ringmaster::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

GpuInfo Gpu(int index, int major, int minor, std::string name = "GPU") {
  GpuInfo g;
  g.index = index;
  g.name = std::move(name);
  g.memory_bytes = uint64_t{16} << 30;
  g.cc_major = major;
  g.cc_minor = minor;
  g.tensor_cores = major >= 7;
  return g;
}

PlanNode Node(std::string id, std::string rack, std::string host, int gpus, int major = 8,
              int minor = 0, double speed = 0) {
  PlanNode n;
  n.node_id = id;
  n.inventory.node_name = id;
  n.inventory.hostname = host;
  n.inventory.rack = std::move(rack);
  n.inventory.addresses = {"10.0.0." + std::to_string(std::hash<std::string>()(id) % 250 + 1)};
  n.inventory.cpu_cores = 16;
  for (int i = 0; i < gpus; ++i) n.inventory.gpus.push_back(Gpu(i, major, minor));
  n.inventory.trainer_samples_per_second = speed;
  return n;
}

PlanRequest Request() {
  PlanRequest r;
  r.job_id = "job-000042";
  r.generation = 3;
  r.coordinator_address = "coord:7070";
  r.master_port = 29511;
  return r;
}

JobPlan MustPlan(const PlanRequest& req, const std::vector<PlanNode>& nodes) {
  absl::StatusOr<JobPlan> plan = PlanRanks(req, nodes);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : JobPlan{};
}

std::vector<std::string> NodeOrder(const JobPlan& plan) {
  std::vector<std::string> ids;
  for (const NodePlan& n : plan.nodes) ids.push_back(n.node_id);
  return ids;
}

TEST(PlannerTest, OrdersByRackThenHostAndAssignsContiguousRanks) {
  const std::vector<PlanNode> nodes = {Node("n3", "rack-b", "h1", 2), Node("n1", "rack-a", "h2", 2),
                                       Node("n2", "rack-a", "h1", 2)};
  JobPlan plan = MustPlan(Request(), nodes);
  EXPECT_THAT(NodeOrder(plan), ElementsAre("n2", "n1", "n3"));
  EXPECT_EQ(plan.world_size, 6);
  ASSERT_EQ(plan.ranks.size(), 6u);
  const std::vector<std::tuple<int, int, int>> expected = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0},
                                                           {1, 1, 1}, {2, 0, 0}, {2, 1, 1}};
  for (int r = 0; r < 6; ++r) {
    const RankPlan& rp = plan.ranks[r];
    EXPECT_EQ(rp.global_rank, r);
    EXPECT_EQ(std::tie(rp.group_rank, rp.local_rank, rp.gpu_index), expected[r]) << "rank " << r;
  }
  EXPECT_EQ(plan.nodes[1].first_rank, 2);
  EXPECT_EQ(plan.nodes[1].num_ranks, 2);
  EXPECT_EQ(plan.master_addr, nodes[2].inventory.addresses[0]);  // n2 hosts rank 0
}

TEST(PlannerTest, PlanDoesNotDependOnJoinOrder) {
  std::vector<PlanNode> nodes = {Node("a", "r1", "h1", 1), Node("b", "r1", "h1", 1),
                                 Node("c", "r0", "h9", 1), Node("d", "", "h5", 1),
                                 Node("e", "r1", "h0", 1)};
  const std::vector<std::string> want = {"d", "c", "e", "a", "b"};  // "" sorts first
  std::sort(nodes.begin(), nodes.end(),
            [](const PlanNode& x, const PlanNode& y) { return x.node_id < y.node_id; });
  do {
    ASSERT_EQ(NodeOrder(MustPlan(Request(), nodes)), want);
  } while (std::next_permutation(
      nodes.begin(), nodes.end(),
      [](const PlanNode& x, const PlanNode& y) { return x.node_id < y.node_id; }));
}

TEST(PlannerTest, EnvironmentIsTheTorchrunSetPlusRingmasters) {
  JobPlan plan = MustPlan(Request(), {Node("n1", "r", "h1", 2), Node("n2", "r", "h2", 2)});
  std::map<std::string, std::string> env = EnvForRank(plan, 3);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "1");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
  EXPECT_EQ(env["ROLE_RANK"], "3");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], plan.nodes[0].address);
  EXPECT_EQ(env["MASTER_PORT"], "29511");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "3");
  EXPECT_EQ(env["RINGMASTER_JOB_ID"], "job-000042");
  EXPECT_EQ(env["RINGMASTER_GENERATION"], "3");
  EXPECT_EQ(env["RINGMASTER_COORDINATOR"], "coord:7070");
  EXPECT_EQ(env.count("RINGMASTER_RANK_WEIGHTS"), 0u);  // equal shares
  EXPECT_EQ(env["RINGMASTER_PRECISION"], "bf16");
  EXPECT_EQ(env["RINGMASTER_COMPRESSION"], "none");
  EXPECT_EQ(env.count("TORCHELASTIC_USE_AGENT_STORE"), 0u);  // MASTER_PORT is our store's port
}

// The contract with the trainer: its own torchrun parser accepts every planned rank and reads
// back the same rank, node and generation, including nodes with different rank counts.
TEST(PlannerTest, TrainerParsesEveryPlannedRank) {
  PlanRequest req = Request();
  req.device = jobspec::Device::kAuto;
  JobPlan plan = MustPlan(
      req, {Node("g", "r", "h1", 4), Node("c", "r", "h2", 0), Node("t", "r", "h3", 2, 7, 5)});
  ASSERT_EQ(plan.world_size, 7);
  for (int r = 0; r < plan.world_size; ++r) {
    const std::map<std::string, std::string> env = EnvForRank(plan, r);
    auto getenv = [&](const char* name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    absl::StatusOr<trainer::DistEnv> d = trainer::ParseDistEnv(getenv);
    ASSERT_TRUE(d.ok()) << "rank " << r << ": " << d.status();
    EXPECT_EQ(d->rank, r);
    EXPECT_EQ(d->world_size, 7);
    EXPECT_EQ(d->local_rank, plan.ranks[r].local_rank);
    EXPECT_EQ(d->group_rank, plan.ranks[r].group_rank);
    EXPECT_EQ(d->num_nodes, 3);
    EXPECT_EQ(d->restart_count, 3);
    EXPECT_EQ(d->master_addr, plan.master_addr);
    EXPECT_EQ(d->master_port, 29511);
  }
}

TEST(PlannerTest, PrecisionAndCompressionFollowComputeCapability) {
  PlanNode mixed = Node("mixed", "r", "h1", 0);
  mixed.inventory.gpus = {Gpu(0, 6, 1, "Tesla P40"), Gpu(1, 7, 0, "V100"), Gpu(2, 7, 5, "T4"),
                          Gpu(3, 8, 0, "A100"), Gpu(4, 9, 0, "H100")};
  JobPlan plan = MustPlan(Request(), {mixed, Node("cpu", "r", "h2", 0)});
  ASSERT_EQ(plan.world_size, 6);
  std::vector<std::string> precision, compression;
  for (const RankPlan& rp : plan.ranks) {
    precision.emplace_back(jobspec::SettingName(rp.precision));
    compression.emplace_back(jobspec::SettingName(rp.compression));
  }
  EXPECT_THAT(precision, ElementsAre("fp32", "fp16", "fp16", "bf16", "bf16", "fp32"));
  EXPECT_THAT(compression, ElementsAre("int8", "none", "none", "none", "none", "auto"));
  EXPECT_EQ(jobspec::SettingName(plan.wire_compression),
            "int8");  // symmetric codecs: the P40 decides for all
  EXPECT_EQ(plan.common_env["RINGMASTER_COMPRESSION"], "int8");
  EXPECT_EQ(plan.ranks[5].gpu_index, -1);
  EXPECT_EQ(jobspec::SettingName(plan.backend), "gloo");  // a CPU rank is in the ring
  // Each rank is told its device (train.device: auto runs where it was placed).
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(EnvForRank(plan, r)["RINGMASTER_DEVICE"], r < 5 ? "cuda" : "cpu") << r;
  }
}

TEST(PlannerTest, WireCompressionWithoutOldGpus) {
  EXPECT_EQ(
      jobspec::SettingName(MustPlan(Request(), {Node("a", "r", "h", 2, 8, 0)}).wire_compression),
      "none");
  EXPECT_EQ(jobspec::SettingName(MustPlan(Request(), {Node("a", "r", "h", 2, 8, 0)}).backend),
            "nccl");
  EXPECT_EQ(jobspec::SettingName(MustPlan(Request(), {Node("a", "r", "h", 0)}).wire_compression),
            "auto");
  PlanRequest req = Request();
  req.compression = jobspec::Compression::kPowerSgd;
  JobPlan plan = MustPlan(req, {Node("a", "r", "h", 1, 6, 1), Node("b", "r", "i", 0)});
  EXPECT_EQ(jobspec::SettingName(plan.wire_compression), "powersgd");
  for (const RankPlan& rp : plan.ranks) EXPECT_EQ(jobspec::SettingName(rp.compression), "powersgd");
}

TEST(PlannerTest, WeightsFollowMeasuredThroughput) {
  // Two H100s at 300 samples/s each and two P40s at 100: shares 1.5 : 0.5.
  JobPlan plan = MustPlan(
      Request(), {Node("fast", "r", "h1", 2, 9, 0, 300), Node("slow", "r", "h2", 2, 6, 1, 100)});
  std::vector<double> w;
  double sum = 0;
  for (const RankPlan& rp : plan.ranks) {
    w.push_back(rp.weight);
    sum += rp.weight;
  }
  EXPECT_THAT(w, ElementsAre(DoubleNear(1.5, 1e-12), DoubleNear(1.5, 1e-12), DoubleNear(0.5, 1e-12),
                             DoubleNear(0.5, 1e-12)));
  EXPECT_NEAR(sum, plan.world_size, 1e-9);
  EXPECT_EQ(plan.common_env["RINGMASTER_RANK_WEIGHTS"], "1.5*2,0.5*2");

  // A CPU node's measurement is for the whole CPU: its two processes share it.
  PlanRequest req = Request();
  req.procs_per_node = "2";
  plan =
      MustPlan(req, {Node("cpu", "r", "h1", 0, 0, 0, 100), Node("gpu", "r", "h2", 2, 8, 0, 100)});
  EXPECT_EQ(plan.common_env["RINGMASTER_RANK_WEIGHTS"], "0.6667*2,1.333*2");
  EXPECT_THAT(plan.ranks[0].weight, DoubleNear(4.0 / 6, 1e-12));
  EXPECT_THAT(plan.ranks[3].weight, DoubleNear(8.0 / 6, 1e-12));
}

TEST(PlannerTest, EqualWeightsUnlessEveryNodeIsMeasured) {
  JobPlan plan = MustPlan(Request(), {Node("a", "r", "h1", 2, 9, 0, 300), Node("b", "r", "h2", 2)});
  for (const RankPlan& rp : plan.ranks) EXPECT_EQ(rp.weight, 1.0);
  EXPECT_EQ(plan.common_env.count("RINGMASTER_RANK_WEIGHTS"), 0u);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(PlannerTest, ProcsPerNode) {
  PlanRequest req = Request();
  req.procs_per_node = "2";
  JobPlan plan = MustPlan(req, {Node("g", "r", "h1", 4), Node("c", "r", "h2", 0)});
  EXPECT_EQ(plan.world_size, 4);
  EXPECT_THAT(std::vector<int>({plan.ranks[0].gpu_index, plan.ranks[1].gpu_index,
                                plan.ranks[2].gpu_index, plan.ranks[3].gpu_index}),
              ElementsAre(0, 1, -1, -1));

  req.procs_per_node = "8";
  absl::StatusOr<JobPlan> bad = PlanRanks(req, {Node("g", "r", "h1", 4)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("node g"), HasSubstr("4 GPU")));

  for (const char* v : {"0", "-1", "x", "", "2x"}) {
    req.procs_per_node = v;
    EXPECT_EQ(PlanRanks(req, {Node("g", "r", "h1", 4)}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << v;
  }
}

TEST(PlannerTest, CpuRanksCappedByCores) {
  PlanRequest req = Request();
  req.procs_per_node = "16";
  EXPECT_EQ(MustPlan(req, {Node("c", "r", "h1", 0)}).world_size, 16);
  req.procs_per_node = "100000";
  absl::StatusOr<JobPlan> bad = PlanRanks(req, {Node("c", "r", "h1", 0)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("procs_per_node 100000"), HasSubstr("CPU node c has 16 core")));
  // No core count reported: held to 256 (kMaxCpuRanksPerNode in planner.cc).
  PlanNode unknown = Node("u", "r", "h1", 0);
  unknown.inventory.cpu_cores = 0;
  req.procs_per_node = "257";
  EXPECT_EQ(PlanRanks(req, {unknown}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(PlannerTest, GpuMustHoldTheModelState) {
  // 16 GiB GPUs (Gpu above); 2e9 parameters are 29.8 GiB of fp32 state unsharded.
  PlanRequest req = Request();
  req.model_parameters = 2'000'000'000;
  req.sharding = jobspec::Sharding::kNoShard;
  absl::StatusOr<JobPlan> bad = PlanRanks(req, {Node("g", "r", "h1", 2)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("2000000000 parameters x 16 bytes, sharding no_shard over 2 rank(s)"),
                    HasSubstr("needs 29.8 GiB per rank"), HasSubstr("node g GPU 0"),
                    HasSubstr("has 16.0 GiB")));
  // full_shard over 2 ranks: 14.9 GiB each, which fits.
  req.sharding = jobspec::Sharding::kFullShard;
  EXPECT_EQ(MustPlan(req, {Node("g", "r", "h1", 2)}).world_size, 2);
  // A CPU node that reports no host memory (an older agent) is not checked.
  req.sharding = jobspec::Sharding::kNoShard;
  EXPECT_EQ(MustPlan(req, {Node("c", "r", "h1", 0)}).world_size, 1);
}

PlanNode CpuNode(std::string id, std::string host, uint64_t memory_gib) {
  PlanNode n = Node(std::move(id), "r", std::move(host), 0);
  n.inventory.host_memory_total_bytes = memory_gib << 30;
  n.inventory.host_memory_available_bytes = (memory_gib << 30) / 2;
  return n;
}

TEST(PlannerTest, CpuNodeMemoryMustHoldItsRanksModelState) {
  // 1e9 parameters: 14.9 GiB of fp32 state per unsharded rank.
  PlanRequest req = Request();
  req.model_parameters = 1'000'000'000;
  req.sharding = jobspec::Sharding::kNoShard;
  EXPECT_EQ(MustPlan(req, {CpuNode("c", "h1", 16)}).world_size, 1);
  // Two ranks on the node need 29.8 GiB together: refused, naming the node, need and memory.
  req.procs_per_node = "2";
  absl::StatusOr<JobPlan> bad = PlanRanks(req, {CpuNode("c", "h1", 16)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("1000000000 parameters x 16 bytes, sharding no_shard over 2 rank(s)"),
                    HasSubstr("needs 14.9 GiB per rank, 29.8 GiB for the 2 rank(s) on CPU node c "
                              "(h1), but it has 16.0 GiB of memory")));
  // The check is against the total, not what was available at registration (8 GiB here).
  req.procs_per_node = "1";
  EXPECT_EQ(MustPlan(req, {CpuNode("c", "h1", 15)}).world_size, 1);
  EXPECT_EQ(PlanRanks(req, {CpuNode("c", "h1", 14)}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Sharding divides the state: full_shard over 2 nodes' ranks, 7.5 GiB each, fits 8 GiB nodes;
  // the smaller second node is the one named when it does not.
  req.sharding = jobspec::Sharding::kFullShard;
  EXPECT_EQ(MustPlan(req, {CpuNode("a", "h1", 8), CpuNode("b", "h2", 8)}).world_size, 2);
  bad = PlanRanks(req, {CpuNode("a", "h1", 8), CpuNode("b", "h2", 7)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("CPU node b (h2)"), HasSubstr("but it has 7.0 GiB of memory")));
  // GPU ranks are held to their GPUs, not to host memory; a GPU node running CPU ranks
  // (device: cpu) is held to its host memory.
  PlanNode gpu = Node("g", "r", "h3", 1);
  gpu.inventory.gpus[0].memory_bytes = uint64_t{80} << 30;
  gpu.inventory.host_memory_total_bytes = uint64_t{4} << 30;
  req.sharding = jobspec::Sharding::kNoShard;
  EXPECT_EQ(MustPlan(req, {gpu}).world_size, 1);
  req.device = jobspec::Device::kCpu;
  EXPECT_THAT(PlanRanks(req, {gpu}).status().message(), HasSubstr("CPU node g (h3)"));
}

TEST(PlannerTest, DeviceSetting) {
  PlanRequest req = Request();
  req.device = jobspec::Device::kCpu;
  JobPlan plan = MustPlan(req, {Node("g", "r", "h1", 4)});
  EXPECT_EQ(plan.world_size, 1);
  EXPECT_EQ(plan.ranks[0].gpu_index, -1);
  EXPECT_EQ(jobspec::SettingName(plan.ranks[0].precision), "fp32");
  EXPECT_FALSE(plan.nodes[0].gpu);
  EXPECT_EQ(jobspec::SettingName(plan.backend), "gloo");
  EXPECT_EQ(EnvForRank(plan, 0)["RINGMASTER_DEVICE"], "cpu");  // a GPU node, but device: cpu

  req.device = jobspec::Device::kCuda;
  absl::StatusOr<JobPlan> bad = PlanRanks(req, {Node("g", "r", "h1", 1), Node("c", "r", "h2", 0)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), HasSubstr("node c"));
}

TEST(PlannerTest, RefusesWhatTheNodesCannotRun) {
  PlanRequest req = Request();
  req.precision = jobspec::Precision::kBf16;
  absl::StatusOr<JobPlan> bad =
      PlanRanks(req, {Node("a100", "r", "h1", 1, 8, 0), Node("p40", "r", "h2", 1, 6, 1)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("node p40"), HasSubstr("sm_61")));
  // fp16 needs tensor cores (sm_70): a P40 cannot run it, a V100 can.
  req.precision = jobspec::Precision::kFp16;
  bad = PlanRanks(req, {Node("p40", "r", "h2", 1, 6, 1)});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("fp16 needs sm_70"), HasSubstr("node p40"), HasSubstr("sm_61")));
  EXPECT_EQ(
      jobspec::SettingName(MustPlan(req, {Node("v100", "r", "h2", 1, 7, 0)}).ranks[0].precision),
      "fp16");

  req = Request();
  req.sharding = jobspec::Sharding::kHybridShard;
  EXPECT_EQ(PlanRanks(req, {Node("a", "r", "h1", 2), Node("b", "r", "h2", 4)}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(PlanRanks(req, {Node("a", "r", "h1", 4), Node("b", "r", "h2", 4)}).ok());

  req = Request();
  req.backend = jobspec::Backend::kNccl;
  EXPECT_THAT(PlanRanks(req, {Node("a", "r", "h1", 2), Node("b", "r", "h2", 0)}).status().message(),
              HasSubstr("CPU ranks"));
}

TEST(PlannerTest, RefusesMalformedInput) {
  EXPECT_EQ(PlanRanks(Request(), {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      PlanRanks(Request(), {Node("a", "r", "h", 1), Node("a", "r", "i", 1)}).status().message(),
      HasSubstr("appears twice"));
  PlanNode nowhere = Node("x", "r", "", 1);
  nowhere.inventory.addresses.clear();
  EXPECT_EQ(PlanRanks(Request(), {nowhere}).status().code(), absl::StatusCode::kInvalidArgument);
  PlanNode by_name = Node("y", "r", "host-y", 1);
  by_name.inventory.addresses.clear();
  EXPECT_EQ(MustPlan(Request(), {by_name}).master_addr, "host-y");

  // Misspelt settings cannot reach the planner any more: PlanRequest holds jobspec's enums.
  for (auto edit : std::vector<void (*)(PlanRequest&)>{
           [](PlanRequest& r) { r.master_port = 0; }, [](PlanRequest& r) { r.master_port = 70000; },
           [](PlanRequest& r) { r.job_id = ""; }, [](PlanRequest& r) { r.generation = -1; }}) {
    PlanRequest req = Request();
    edit(req);
    EXPECT_EQ(PlanRanks(req, {Node("a", "r", "h", 1)}).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// 4096 nodes x 8 GPUs in 64 racks, joined in random order: the structure of the plan. (Speed is
// not asserted here; the algorithm is O(R + N log N) and runs in milliseconds.)
TEST(PlannerTest, PlansFourThousandNodesOfEightGpus) {
  constexpr int kNodes = 4096, kGpus = 8;
  std::vector<PlanNode> nodes;
  nodes.reserve(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    const int gen = i % 3;  // mixed generations: P40, V100, H100
    nodes.push_back(Node("node-" + std::to_string(i), "rack-" + std::to_string(i % 64),
                         "host-" + std::to_string(i), kGpus,
                         gen == 0   ? 6
                         : gen == 1 ? 7
                                    : 9,
                         gen == 0 ? 1 : 0, 100.0 * (gen + 1)));
  }
  std::shuffle(nodes.begin(), nodes.end(), std::mt19937(7));
  JobPlan plan = MustPlan(Request(), nodes);
  ASSERT_EQ(plan.world_size, kNodes * kGpus);
  ASSERT_EQ(plan.nodes.size(), static_cast<size_t>(kNodes));
  ASSERT_EQ(plan.ranks.size(), static_cast<size_t>(kNodes * kGpus));
  double sum = 0;
  for (int g = 0; g < kNodes; ++g) {
    const NodePlan& n = plan.nodes[g];
    ASSERT_EQ(n.group_rank, g);
    ASSERT_EQ(n.first_rank, g * kGpus);
    ASSERT_EQ(n.num_ranks, kGpus);
    if (g > 0) {
      const NodePlan& p = plan.nodes[g - 1];
      ASSERT_LE(std::tie(p.rack, p.hostname), std::tie(n.rack, n.hostname));
    }
    for (int l = 0; l < kGpus; ++l) {
      const RankPlan& rp = plan.ranks[n.first_rank + l];
      ASSERT_EQ(rp.global_rank, n.first_rank + l);
      ASSERT_EQ(rp.local_rank, l);
      ASSERT_EQ(rp.group_rank, g);
      ASSERT_EQ(rp.env.at("RANK"), std::to_string(rp.global_rank));
      sum += rp.weight;
    }
  }
  EXPECT_EQ(plan.nodes.front().rack, "rack-0");
  EXPECT_EQ(plan.nodes.back().rack, "rack-9");  // lexicographic label order
  EXPECT_NEAR(sum, kNodes * kGpus, 1e-6);
  EXPECT_EQ(plan.common_env["WORLD_SIZE"], "32768");
  EXPECT_EQ(plan.common_env["GROUP_WORLD_SIZE"], "4096");
  EXPECT_EQ(jobspec::SettingName(plan.wire_compression), "int8");
  // 32768 mixed weights fit in one environment variable as one run per node.
  EXPECT_TRUE(plan.warnings.empty());
  ASSERT_EQ(plan.common_env.count("RINGMASTER_RANK_WEIGHTS"), 1u);
  EXPECT_LE(plan.common_env["RINGMASTER_RANK_WEIGHTS"].size(), jobspec::kMaxRankWeightsBytes);
  EXPECT_NE(plan.ranks[12345].weight, 1.0);
}

// Mixed weights within the variable's budget: 512 nodes x 8 GPUs of two generations.
TEST(PlannerTest, MixedWeightsForFourThousandRanks) {
  std::vector<PlanNode> nodes;
  for (int i = 0; i < 512; ++i) {
    nodes.push_back(Node("node-" + std::to_string(i), "rack-" + std::to_string(i % 8),
                         "host-" + std::to_string(i), 8, i % 2 ? 6 : 9, i % 2 ? 1 : 0,
                         i % 2 ? 100 : 300));
  }
  JobPlan plan = MustPlan(Request(), nodes);
  EXPECT_TRUE(plan.warnings.empty());
  const std::string& text = plan.common_env["RINGMASTER_RANK_WEIGHTS"];
  EXPECT_LE(text.size(), jobspec::kMaxRankWeightsBytes);
  // Nodes are ordered rack by rack and rack k holds one generation: one "w*512" run per rack.
  EXPECT_EQ(std::count(text.begin(), text.end(), ',') + 1, 8);
  for (const RankPlan& rp : plan.ranks) {
    const bool p40 = plan.nodes[rp.group_rank].node_id.back() % 2 == 1;  // odd node number
    ASSERT_DOUBLE_EQ(rp.weight, p40 ? 0.5 : 1.5) << rp.global_rank;
  }
}

}  // namespace
}  // namespace ringmaster::coordinator
