// ParseDistEnv over fake environments (good ones, and each way one can be wrong), and
// MakeRendezvousStore over a shared directory and over TCP on loopback.
#include "trainer/parallel/dist_env.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "trainer/comm/store.h"
#include "trainer/comm/tcp_store.h"

namespace ringmaster::trainer {
namespace {

using Env = std::map<std::string, std::string>;

absl::StatusOr<DistEnv> Parse(const Env& vars) {
  return ParseDistEnv([&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

// A well-formed 2-node x 4-process torchrun environment for rank 5, to be broken one way.
Env Torchrun() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"GROUP_RANK", "1"},
          {"GROUP_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RESTART_COUNT", "2"}};
}

std::string Hostname() {
  char host[HOST_NAME_MAX + 1] = {};
  EXPECT_EQ(::gethostname(host, sizeof(host)), 0);
  return host;
}

TEST(DistEnvTest, NoWorldSizeIsASingleProcess) {
  absl::StatusOr<DistEnv> env = Parse({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->distributed);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_world_size, 1);
  EXPECT_EQ(env->group_rank, 0);
  EXPECT_EQ(env->num_nodes, 1);
  EXPECT_EQ(env->master_port, 0);
  EXPECT_EQ(env->iface, "127.0.0.1");
}

TEST(DistEnvTest, FullTorchrunEnvironment) {
  Env vars = Torchrun();
  vars["GLOO_SOCKET_IFNAME"] = "eth0";
  absl::StatusOr<DistEnv> env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->distributed);
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->group_rank, 1);
  EXPECT_EQ(env->num_nodes, 2);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->restart_count, 2);
  EXPECT_EQ(env->store_dir, "");
  EXPECT_EQ(env->iface, "eth0");
}

TEST(DistEnvTest, RendezvousTimeoutDefaultsToTorchrunsJoinTimeout) {
  absl::StatusOr<DistEnv> env = Parse(Torchrun());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rendezvous_timeout, absl::Seconds(600));
  Env vars = Torchrun();
  vars["RINGMASTER_RENDEZVOUS_TIMEOUT_S"] = "2.5";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rendezvous_timeout, absl::Milliseconds(2500));
}

TEST(DistEnvTest, StorePortAvoidsTorchrunsAgentStore) {
  Env vars = Torchrun();
  absl::StatusOr<DistEnv> env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->store_port, 29500);  // started by hand: MASTER_PORT is ours
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->store_port, 29501);  // torchrun's agent holds MASTER_PORT
  vars["RINGMASTER_STORE_PORT"] = "31000";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->store_port, 31000);
  vars["RINGMASTER_STORE_PORT"] = "0";
  env = Parse(vars);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(std::string(env.status().message()).find("RINGMASTER_STORE_PORT=0"), std::string::npos);
}

TEST(DistEnvTest, RankWeights) {
  Env vars = Torchrun();  // WORLD_SIZE=8
  vars["RINGMASTER_RANK_WEIGHTS"] = "1,1,1,1,3,3,3,3.5";
  absl::StatusOr<DistEnv> env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank_weights, (std::vector<double>{1, 1, 1, 1, 3, 3, 3, 3.5}));
  vars["RINGMASTER_RANK_WEIGHTS"] = "1*4,3*3,3.5";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank_weights, (std::vector<double>{1, 1, 1, 1, 3, 3, 3, 3.5}));
  for (const char* bad : {"1,1", "1,1,1,1,1,1,1,0", "1,1,1,1,1,1,1,x", "1,1,1,1,1,1,1,-2", "1*9",
                          "1*4,2*5", "1*0,1*8", "2*x,1*8"}) {
    vars["RINGMASTER_RANK_WEIGHTS"] = bad;
    env = Parse(vars);
    ASSERT_FALSE(env.ok()) << bad;
    EXPECT_NE(std::string(env.status().message()).find("RINGMASTER_RANK_WEIGHTS"),
              std::string::npos);
  }
}

TEST(DistEnvTest, ThePlansPrecisionAndCompressionAreTyped) {
  Env vars = Torchrun();
  absl::StatusOr<DistEnv> env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->precision.has_value());  // unset: the job's
  EXPECT_FALSE(env->compression.has_value());
  vars["RINGMASTER_PRECISION"] = "bf16";
  vars["RINGMASTER_COMPRESSION"] = "int8";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->precision, jobspec::Precision::kBf16);
  EXPECT_EQ(env->compression, jobspec::Compression::kInt8);
  vars["RINGMASTER_PRECISION"] = "";  // empty is unset, as for the other variables
  vars["RINGMASTER_COMPRESSION"] = "powersgd";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->precision.has_value());
  EXPECT_EQ(env->compression, jobspec::Compression::kPowerSgd);
  // A lone process (no WORLD_SIZE) reads them too.
  env = Parse({{"RINGMASTER_PRECISION", "fp32"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_FALSE(env->distributed);
  EXPECT_EQ(env->precision, jobspec::Precision::kFp32);
  EXPECT_FALSE(Parse({{"RINGMASTER_PRECISION", "half"}}).ok());
}

TEST(DistEnvTest, NodeDefaultsFromLocalWorldSize) {
  Env vars = Torchrun();
  vars.erase("GROUP_RANK");
  vars.erase("GROUP_WORLD_SIZE");
  vars["RANK"] = "6";
  vars["LOCAL_RANK"] = "2";
  absl::StatusOr<DistEnv> env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->group_rank, 1);  // 6 / 4
  EXPECT_EQ(env->num_nodes, 2);   // 8 / 4
}

TEST(DistEnvTest, WorldSizeOneNeedsNoMaster) {
  absl::StatusOr<DistEnv> env = Parse({{"WORLD_SIZE", "1"}, {"RANK", "0"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_TRUE(env->distributed);
  EXPECT_EQ(env->world_size, 1);
}

TEST(DistEnvTest, StoreDirReplacesMaster) {
  absl::StatusOr<DistEnv> env =
      Parse({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"RINGMASTER_STORE_DIR", "/shared/rdzv"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->store_dir, "/shared/rdzv");
  EXPECT_EQ(env->master_addr, "");
}

TEST(DistEnvTest, IfaceChoice) {
  Env vars = Torchrun();
  // An unresolvable master: listen on our own name.
  EXPECT_EQ(Parse(vars)->iface, Hostname());
  vars["MASTER_ADDR"] = "localhost";
  EXPECT_EQ(Parse(vars)->iface, "127.0.0.1");
  vars["MASTER_ADDR"] = "127.0.0.1";
  EXPECT_EQ(Parse(vars)->iface, "127.0.0.1");
  vars["GLOO_SOCKET_IFNAME"] = "eth1";
  EXPECT_EQ(Parse(vars)->iface, "eth1");
  vars["RINGMASTER_GLOO_IFACE"] = "10.0.0.7";  // Ours wins over Gloo's.
  EXPECT_EQ(Parse(vars)->iface, "10.0.0.7");
}

// This host's first non-loopback IPv4 address, "" if it has none.
std::string OwnAddress() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string out;
  for (ifaddrs* i = all; i != nullptr && out.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    if (std::string(buf).rfind("127.", 0) != 0) out = buf;
  }
  ::freeifaddrs(all);
  return out;
}

TEST(DistEnvTest, RankZerosHostListensOnTheMasterAddressNotOnTheHostname) {
  // Rank 0's MASTER_ADDR is its own address. Debian maps the hostname to 127.0.1.1, so listening
  // on the hostname would advertise a loopback address to the other nodes.
  const std::string own = OwnAddress();
  if (own.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  Env vars = Torchrun();
  vars["MASTER_ADDR"] = own;
  EXPECT_EQ(Parse(vars)->iface, own);
}

struct BadCase {
  Env changes;                    // Applied to Torchrun(); "" as a value...
  std::vector<std::string> drop;  // ...and these removed.
  std::string want;               // Substring of the error.
};

TEST(DistEnvTest, InvalidEnvironmentsNameTheVariable) {
  const std::vector<BadCase> cases = {
      {{{"WORLD_SIZE", "four"}}, {}, "WORLD_SIZE=four is not an integer"},
      {{{"WORLD_SIZE", ""}}, {}, "WORLD_SIZE= is not an integer"},
      {{{"WORLD_SIZE", " 8"}}, {}, "WORLD_SIZE= 8 is not an integer"},
      {{{"WORLD_SIZE", "8 "}}, {}, "WORLD_SIZE=8  is not an integer"},
      {{{"WORLD_SIZE", "+8"}}, {}, "WORLD_SIZE=+8 is not an integer"},
      {{{"WORLD_SIZE", "8.0"}}, {}, "WORLD_SIZE=8.0 is not an integer"},
      {{{"WORLD_SIZE", "99999999999"}}, {}, "WORLD_SIZE=99999999999 is out of range"},
      {{{"WORLD_SIZE", "0"}}, {}, "WORLD_SIZE=0 must be at least 1"},
      {{{"RANK", "8"}}, {}, "RANK=8 is not below WORLD_SIZE=8"},
      {{{"RANK", "-1"}}, {}, "RANK=-1 is negative"},
      {{{"RANK", "0x5"}}, {}, "RANK=0x5 is not an integer"},
      {{}, {"RANK"}, "RANK is required when WORLD_SIZE=8"},
      {{}, {"WORLD_SIZE"}, "RANK=5 is set but WORLD_SIZE is not"},
      {{{"LOCAL_RANK", "x"}}, {}, "LOCAL_RANK=x is not an integer"},
      {{{"LOCAL_RANK", "4"}}, {}, "LOCAL_RANK=4 is not below LOCAL_WORLD_SIZE=4"},
      {{{"LOCAL_RANK", "-2"}}, {}, "LOCAL_RANK=-2 is negative"},
      {{}, {"LOCAL_WORLD_SIZE"}, "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1 (default)"},
      {{{"LOCAL_WORLD_SIZE", "0"}}, {}, "LOCAL_WORLD_SIZE=0 must be at least 1"},
      {{{"LOCAL_WORLD_SIZE", "16"}}, {}, "LOCAL_WORLD_SIZE=16 exceeds WORLD_SIZE=8"},
      {{{"GROUP_RANK", "2"}}, {}, "GROUP_RANK=2 is not in 0..GROUP_WORLD_SIZE=2-1"},
      {{{"GROUP_RANK", "n1"}}, {}, "GROUP_RANK=n1 is not an integer"},
      {{{"GROUP_WORLD_SIZE", "0"}}, {}, "GROUP_WORLD_SIZE=0 is not in 1..WORLD_SIZE=8"},
      {{{"TORCHELASTIC_RESTART_COUNT", "-1"}}, {}, "TORCHELASTIC_RESTART_COUNT=-1 is negative"},
      {{{"TORCHELASTIC_RESTART_COUNT", "1e3"}}, {}, "TORCHELASTIC_RESTART_COUNT=1e3 is not"},
      {{}, {"MASTER_ADDR"}, "MASTER_ADDR is required when WORLD_SIZE=8"},
      {{{"MASTER_ADDR", ""}}, {}, "MASTER_ADDR is required when WORLD_SIZE=8"},
      {{}, {"MASTER_PORT"}, "MASTER_PORT is required when WORLD_SIZE=8"},
      {{{"MASTER_PORT", "0"}}, {}, "MASTER_PORT=0 is not in 1..65535"},
      {{{"MASTER_PORT", "65536"}}, {}, "MASTER_PORT=65536 is not in 1..65535"},
      {{{"MASTER_PORT", "http"}}, {}, "MASTER_PORT=http is not an integer"},
      {{{"RINGMASTER_PRECISION", "fp8"}},
       {},
       "RINGMASTER_PRECISION=fp8: 'fp8' is not one of: auto, fp32, fp16, bf16"},
      {{{"RINGMASTER_PRECISION", "BF16"}}, {}, "RINGMASTER_PRECISION=BF16: 'BF16' is not one of"},
      {{{"RINGMASTER_COMPRESSION", "zstd"}},
       {},
       "RINGMASTER_COMPRESSION=zstd: 'zstd' is not one of: auto, none, fp16, bf16, int8, powersgd"},
      {{{"RINGMASTER_RENDEZVOUS_TIMEOUT_S", "0"}},
       {},
       "RINGMASTER_RENDEZVOUS_TIMEOUT_S=0 is not a number of seconds"},
      {{{"RINGMASTER_RENDEZVOUS_TIMEOUT_S", "ten"}},
       {},
       "RINGMASTER_RENDEZVOUS_TIMEOUT_S=ten is not a number of seconds"},
  };
  for (const BadCase& c : cases) {
    Env vars = Torchrun();
    for (const auto& [k, v] : c.changes) vars[k] = v;
    for (const std::string& k : c.drop) vars.erase(k);
    absl::StatusOr<DistEnv> env = Parse(vars);
    ASSERT_FALSE(env.ok()) << "expected an error containing: " << c.want;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument) << env.status();
    EXPECT_TRUE(absl::StrContains(env.status().message(), c.want))
        << "got: " << env.status() << "\nwant: " << c.want;
  }
}

TEST(DistEnvTest, FromProcessReadsTheRealEnvironment) {
  // Only this test touches the process environment; the names are restored afterwards.
  const std::vector<std::string> names = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                          "RINGMASTER_STORE_DIR"};
  std::map<std::string, std::optional<std::string>> saved;
  for (const std::string& n : names) {
    const char* v = ::getenv(n.c_str());
    saved[n] = v ? std::optional<std::string>(v) : std::nullopt;
  }
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "1234", 1);
  ::unsetenv("RINGMASTER_STORE_DIR");
  absl::StatusOr<DistEnv> env = DistEnvFromProcess();
  for (const auto& [n, v] : saved) {
    if (v.has_value()) {
      ::setenv(n.c_str(), v->c_str(), 1);
    } else {
      ::unsetenv(n.c_str());
    }
  }
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 1);
  EXPECT_EQ(env->world_size, 3);
  EXPECT_EQ(env->master_port, 1234);
}

TEST(DistEnvTest, RendezvousThroughStoreDir) {
  std::string dir = (std::filesystem::temp_directory_path() / "dist_env_test.XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  DistEnv env0, env1;
  env0.distributed = env1.distributed = true;
  env0.world_size = env1.world_size = 2;
  env1.rank = 1;
  env0.store_dir = env1.store_dir = dir + "/rdzv";  // Created on demand.
  auto s0 = MakeRendezvousStore(env0, absl::Seconds(5));
  auto s1 = MakeRendezvousStore(env1, absl::Seconds(5));
  ASSERT_TRUE(s0.ok()) << s0.status();
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_NE(dynamic_cast<FileStore*>(s0->get()), nullptr);
  ASSERT_TRUE((*s0)->Set("addr/0", "a0").ok());
  ASSERT_TRUE((*s1)->Set("addr/1", "a1").ok());
  EXPECT_EQ((*s1)->Get("addr/0", absl::Seconds(5)).value_or("?"), "a0");
  EXPECT_EQ((*s0)->Get("addr/1", absl::Seconds(5)).value_or("?"), "a1");
  std::filesystem::remove_all(dir);
}

TEST(DistEnvTest, RendezvousOverTcp) {
  DistEnv env0;
  env0.distributed = true;
  env0.world_size = 2;
  env0.master_addr = "127.0.0.1";
  env0.store_port = 0;  // Rank 0 hosts the server on a free port; rank 1 is told which.
  auto s0 = MakeRendezvousStore(env0, absl::Seconds(5));
  ASSERT_TRUE(s0.ok()) << s0.status();
  auto* tcp0 = dynamic_cast<TcpStore*>(s0->get());
  ASSERT_NE(tcp0, nullptr);
  EXPECT_TRUE(tcp0->is_server());

  DistEnv env1 = env0;
  env1.rank = 1;
  env1.store_port = tcp0->port();
  auto s1 = MakeRendezvousStore(env1, absl::Seconds(5));
  ASSERT_TRUE(s1.ok()) << s1.status();
  auto* tcp1 = dynamic_cast<TcpStore*>(s1->get());
  ASSERT_NE(tcp1, nullptr);
  EXPECT_FALSE(tcp1->is_server());

  ASSERT_TRUE((*s1)->Set("from1", "x").ok());
  ASSERT_TRUE((*s0)->Set("from0", "y").ok());
  EXPECT_EQ((*s0)->Get("from1", absl::Seconds(5)).value_or("?"), "x");
  EXPECT_EQ((*s1)->Get("from0", absl::Seconds(5)).value_or("?"), "y");
}

TEST(DistEnvTest, LoneProcessGetsAnInProcessStore) {
  auto s = MakeRendezvousStore(DistEnv{}, absl::Seconds(1));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Set("k", "v").ok());
  EXPECT_EQ((*s)->Get("k", absl::Seconds(1)).value_or("?"), "v");

  DistEnv two;
  two.world_size = 2;
  EXPECT_EQ(MakeRendezvousStore(two, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::trainer
