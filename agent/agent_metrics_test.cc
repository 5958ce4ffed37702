// The agent's /metrics over real HTTP: its own state and the figures of the ranks it runs, read
// from their status files at scrape time.
#include "agent/agent_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/rank_status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(AgentMetricsTest, CountsEveryStateIncludingZeros) {
  std::vector<v1::RankProgress> reports(3);
  reports[0].set_state(v1::RANK_PROCESS_STATE_RUNNING);
  reports[1].set_state(v1::RANK_PROCESS_STATE_RUNNING);
  reports[2].set_state(v1::RANK_PROCESS_STATE_SIGNALED);
  std::map<std::string, int> n = CountRankStates(reports);
  EXPECT_EQ(n["running"], 2);
  EXPECT_EQ(n["signaled"], 1);
  EXPECT_EQ(n.count("failed_to_start"), 1u);
  EXPECT_EQ(n["failed_to_start"], 0);
}

// Without a working NVIDIA driver the monitor must say why, not crash: either NVML is absent
// (NotFound, naming the library) or its library is installed without a loaded driver, e.g. by a
// CUDA toolkit package (Unavailable, naming the failed call and NVML's error).
TEST(GpuMonitorTest, WithoutADriverNvmlSaysWhy) {
  absl::StatusOr<std::unique_ptr<GpuMonitor>> m = OpenNvmlMonitor();
  if (m.ok()) GTEST_SKIP() << "this machine has a working NVIDIA driver";
  const std::string why(m.status().message());
  if (m.status().code() == absl::StatusCode::kNotFound) {
    EXPECT_THAT(why, HasSubstr("libnvidia-ml.so.1"));
  } else {
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
    EXPECT_THAT(why, HasSubstr("nvmlInit_v2 failed with NVML error"));
  }
}

#ifdef RINGMASTER_HAVE_PROMETHEUS
class FakeGpus : public GpuMonitor {
 public:
  std::vector<GpuReading> Read() override {
    GpuReading g;
    g.index = 1;
    g.uuid = "GPU-abc";
    g.memory_used_bytes = uint64_t{1} << 30;
    g.memory_total_bytes = uint64_t{24} << 30;
    g.utilization = 0.75;
    return {g};
  }
};

// GET /metrics from 127.0.0.1:port; the whole response.
std::string HttpGet(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return "";
  }
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fd);
  return out;
}

TEST(AgentMetricsTest, ServesItsStateAndItsRanksFigures) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("agent_metrics_test_", ::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "rank-5.status").string();
  auto status = trainer::RankStatus::CreateFile(path);
  ASSERT_TRUE(status.ok()) << status.status();
  trainer::StepFigures f;
  f.step = 2;
  f.samples = 6;
  f.loss = 0.5;
  f.unix_time = 1'700'000'000;
  (*status)->OnStep(f, {});

  FakeGpus gpus;
  AgentMetrics metrics(123.5, &gpus);
  AgentSnapshot snap;
  snap.connected = true;
  snap.ranks_by_state = {{"running", 1}, {"exited", 0}};
  snap.rank_starts = 3;
  snap.sources = {{"job-9", 0, 5, path}, {"job-9", 0, 6, (dir / "absent.status").string()}};
  metrics.Publish(snap);
  auto server = ServeAgentMetrics("127.0.0.1:0", &metrics, "node-a");
  ASSERT_TRUE(server.ok()) << server.status();

  std::string page = HttpGet((*server)->port());
  EXPECT_THAT(page, HasSubstr("ringmaster_agent_connected{node=\"node-a\"} 1"));
  EXPECT_THAT(page, HasSubstr("ringmaster_agent_rank_starts_total{node=\"node-a\"} 3"));
  EXPECT_THAT(page, HasSubstr("ringmaster_agent_throughput_samples_per_second{node=\"node-a\"} "
                              "123.5"));
  EXPECT_THAT(page, HasSubstr("ringmaster_agent_ranks{node=\"node-a\",state=\"running\"} 1"));
  EXPECT_THAT(page, HasSubstr("ringmaster_trainer_samples_total{ringmaster_job=\"job-9\","
                              "rank=\"5\"} 6"));
  EXPECT_THAT(page, HasSubstr("ringmaster_trainer_loss{ringmaster_job=\"job-9\",rank=\"5\"} 0.5"));
  EXPECT_THAT(page, Not(HasSubstr("rank=\"6\"")));  // no status file yet: left out
  EXPECT_THAT(page, HasSubstr("ringmaster_gpu_memory_used_bytes{node=\"node-a\",gpu=\"1\","
                              "UUID=\"GPU-abc\"} 1073741824"));
  EXPECT_THAT(page, HasSubstr("ringmaster_gpu_memory_total_bytes{node=\"node-a\",gpu=\"1\","
                              "UUID=\"GPU-abc\"} 25769803776"));
  EXPECT_THAT(page, HasSubstr("ringmaster_gpu_utilization_ratio{node=\"node-a\",gpu=\"1\","
                              "UUID=\"GPU-abc\"} 0.75"));

  // Figures are read at scrape time; the connection state follows the loop.
  f.samples = 4;
  (*status)->OnStep(f, {});
  metrics.SetConnected(false);
  page = HttpGet((*server)->port());
  EXPECT_THAT(page, HasSubstr("ringmaster_trainer_samples_total{ringmaster_job=\"job-9\","
                              "rank=\"5\"} 10"));
  EXPECT_THAT(page, HasSubstr("ringmaster_agent_connected{node=\"node-a\"} 0"));

  // A taken port is refused with an error naming it.
  auto again = ServeAgentMetrics(absl::StrCat("127.0.0.1:", (*server)->port()), &metrics, "x");
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr(absl::StrCat("127.0.0.1:", (*server)->port())));
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace ringmaster::agent
