#include "agent/inventory.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

using ::testing::HasSubstr;

TEST(GpuOverride, ParsesCountNameCapabilityMemory) {
  absl::StatusOr<std::vector<v1::GpuInfo>> g = ParseGpuOverride("2xTesla P40:sm_61:24GiB");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[1].index(), 1u);
  EXPECT_EQ((*g)[0].name(), "Tesla P40");
  EXPECT_EQ((*g)[0].compute_capability_major(), 6u);
  EXPECT_EQ((*g)[0].compute_capability_minor(), 1u);
  EXPECT_EQ((*g)[0].memory_bytes(), uint64_t{24} << 30);
  EXPECT_FALSE((*g)[0].tensor_cores());
}

TEST(GpuOverride, MixedGroupsAndNone) {
  absl::StatusOr<std::vector<v1::GpuInfo>> g =
      ParseGpuOverride("NVIDIA A100:sm_80:80GiB,1xTesla T4:sm_75:15360MiB,1xB200:sm_100:180GB");
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->size(), 3u);
  EXPECT_EQ((*g)[0].name(), "NVIDIA A100");
  EXPECT_TRUE((*g)[0].tensor_cores());
  EXPECT_EQ((*g)[1].memory_bytes(), uint64_t{15360} << 20);
  EXPECT_EQ((*g)[2].compute_capability_major(), 10u);
  EXPECT_EQ((*g)[2].memory_bytes(), uint64_t{180'000'000'000});
  absl::StatusOr<std::vector<v1::GpuInfo>> none = ParseGpuOverride("none");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(GpuOverride, RejectsMalformedWithTheGroupNamed) {
  for (const char* bad :
       {"", "2xTesla P40:sm_61", "2xTesla P40:61:24GiB", "0xP40:sm_61:24GiB", "2xP40:sm_6x:24GiB",
        "2xP40:sm_61:24", "2xP40:sm_61:-1GiB", "P40:sm_61:24GiB,", "2x:sm_61:24GiB",
        "P40:sm_61:24GiB:extra", "99xP40:sm_61:1GiB"}) {
    absl::StatusOr<std::vector<v1::GpuInfo>> g = ParseGpuOverride(bad);
    EXPECT_FALSE(g.ok()) << bad;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("--inventory-override")) << bad;
  }
  EXPECT_THAT(std::string(ParseGpuOverride("2xP40:sm_61:24").status().message()),
              HasSubstr("'2xP40:sm_61:24'"));
}

constexpr char kMeminfo[] =
    "MemTotal:       16318480 kB\n"
    "MemFree:         1203004 kB\n"
    "MemAvailable:   11547384 kB\n"
    "Buffers:          419532 kB\n";

TEST(HostMemory, ReadsMemTotalAndMemAvailableInKiB) {
  HostMemory m = ParseHostMemory(kMeminfo, "max\n");  // cgroup v2 without a limit
  EXPECT_EQ(m.total, uint64_t{16318480} * 1024);
  EXPECT_EQ(m.available, uint64_t{11547384} * 1024);
  m = ParseHostMemory(kMeminfo, "");  // no cgroup file
  EXPECT_EQ(m.total, uint64_t{16318480} * 1024);
  // cgroup v1 without a limit: a huge figure, no effect.
  m = ParseHostMemory(kMeminfo, "9223372036854771712\n");
  EXPECT_EQ(m.total, uint64_t{16318480} * 1024);
}

TEST(HostMemory, ACgroupLimitLowersBoth) {
  HostMemory m = ParseHostMemory(kMeminfo, "4294967296\n");
  EXPECT_EQ(m.total, uint64_t{4} << 30);
  EXPECT_EQ(m.available, uint64_t{4} << 30);
  m = ParseHostMemory(kMeminfo, "16106127360\n");  // 15 GiB: over MemAvailable
  EXPECT_EQ(m.total, uint64_t{15} << 30);
  EXPECT_EQ(m.available, uint64_t{11547384} * 1024);
}

TEST(HostMemory, UnknownWithoutTheLines) {
  HostMemory m = ParseHostMemory("MemFree: 12 kB\nMemTotal: lots\n", "max");
  EXPECT_EQ(m.total, 0u);
  EXPECT_EQ(m.available, 0u);
}

TEST(Inventory, CollectsHostAndOverride) {
  InventoryOptions o;
  o.node_name = "n1";
  o.rack = "r7";
  o.addresses = {"10.0.0.5"};
  o.gpu_override = "1xTesla P40:sm_61:24GiB";
  absl::StatusOr<v1::NodeInventory> inv = CollectInventory(o);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->node_name(), "n1");
  EXPECT_EQ(inv->rack(), "r7");
  EXPECT_FALSE(inv->hostname().empty());
  ASSERT_EQ(inv->addresses_size(), 1);
  EXPECT_EQ(inv->addresses(0), "10.0.0.5");
  EXPECT_GE(inv->cpu_cores(), 1u);
  EXPECT_EQ(inv->gpus_size(), 1);
  // Linux always has MemTotal: the node reports its memory.
  EXPECT_GT(inv->host_memory_total_bytes(), 0u);
  EXPECT_LE(inv->host_memory_available_bytes(), inv->host_memory_total_bytes());
  o.gpu_override = "bogus";
  EXPECT_FALSE(CollectInventory(o).ok());
}

}  // namespace
}  // namespace ringmaster::agent
