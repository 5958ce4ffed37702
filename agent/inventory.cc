#include "agent/inventory.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/absl_view.h"

#ifdef RINGMASTER_AGENT_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ringmaster::agent {
namespace {

absl::Status GroupError(absl::string_view group, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--inventory-override: group '", group, "': ", why,
                   " (expected [COUNTx]NAME:sm_XY:MEMORY, e.g. 2xTesla P40:sm_61:24GiB)"));
}

absl::StatusOr<uint64_t> ParseMemory(absl::string_view group, absl::string_view text) {
  struct Unit {
    const char* suffix;
    uint64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"GiB", uint64_t{1} << 30}, {"MiB", uint64_t{1} << 20}, {"GB", 1'000'000'000}};
  for (const Unit& u : kUnits) {
    absl::string_view num = text;
    if (!absl::ConsumeSuffix(&num, u.suffix)) continue;
    uint64_t v = 0;
    if (num.empty() || num.front() == '+' || !absl::SimpleAtoi(num, &v) || v == 0 ||
        v > (uint64_t{1} << 20)) {
      return GroupError(group,
                        absl::StrCat("memory '", text, "' is not a positive integer ", u.suffix));
    }
    return v * u.bytes;
  }
  return GroupError(group, absl::StrCat("memory '", text, "' needs a unit: GiB, MiB or GB"));
}

std::vector<std::string> HostAddresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) == nullptr) continue;
    if (absl::string_view(buf).substr(0, 4) == "127.") continue;
    out.emplace_back(buf);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::GpuInfo>> ParseGpuOverride(std::string_view text_in) {
  const absl::string_view text = ToAbsl(text_in);
  std::vector<v1::GpuInfo> gpus;
  if (text == "none") return gpus;
  if (text.empty()) return absl::InvalidArgumentError("--inventory-override: empty");
  for (absl::string_view group : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(group, ':');
    if (parts.size() != 3) return GroupError(group, "needs three ':'-separated fields");
    absl::string_view name = parts[0];
    int count = 1;
    const size_t x = name.find('x');
    if (x != absl::string_view::npos && x > 0 && x < 4) {
      int n = 0;
      if (absl::SimpleAtoi(name.substr(0, x), &n) && name.substr(0, 1) != "+" &&
          name.substr(0, 1) != "-") {
        if (n < 1 || n > 64) return GroupError(group, "count must be 1..64");
        count = n;
        name.remove_prefix(x + 1);
      }
    }
    if (name.empty() || name.front() == ' ' || name.back() == ' ') {
      return GroupError(group, "empty or padded GPU name");
    }
    absl::string_view sm = parts[1];
    if (!absl::ConsumePrefix(&sm, "sm_") || sm.size() < 2 || sm.size() > 3) {
      return GroupError(group, absl::StrCat("compute capability '", parts[1],
                                            "' is not sm_XY (e.g. sm_61, sm_80, sm_120)"));
    }
    int major = 0, minor = 0;
    if (!absl::SimpleAtoi(sm.substr(0, sm.size() - 1), &major) ||
        !absl::SimpleAtoi(sm.substr(sm.size() - 1), &minor) || major < 1 || minor < 0 ||
        sm.front() == '+' || sm.front() == '-') {
      return GroupError(group, absl::StrCat("compute capability '", parts[1], "' is not sm_XY"));
    }
    absl::StatusOr<uint64_t> mem = ParseMemory(group, parts[2]);
    if (!mem.ok()) return mem.status();
    for (int i = 0; i < count; ++i) {
      v1::GpuInfo g;
      g.set_index(static_cast<uint32_t>(gpus.size()));
      g.set_name(std::string(name));
      g.set_memory_bytes(*mem);
      g.set_compute_capability_major(static_cast<uint32_t>(major));
      g.set_compute_capability_minor(static_cast<uint32_t>(minor));
      g.set_tensor_cores(major >= 7);
      g.set_uuid(absl::StrCat("override-", gpus.size()));
      gpus.push_back(std::move(g));
    }
  }
  if (gpus.size() > 64) return absl::InvalidArgumentError("--inventory-override: over 64 GPUs");
  return gpus;
}

HostMemory ParseHostMemory(std::string_view meminfo, std::string_view cgroup_limit) {
  HostMemory m;
  for (absl::string_view line : absl::StrSplit(ToAbsl(meminfo), '\n')) {
    uint64_t* field = nullptr;
    if (absl::ConsumePrefix(&line, "MemTotal:")) {
      field = &m.total;
    } else if (absl::ConsumePrefix(&line, "MemAvailable:")) {
      field = &m.available;
    } else {
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    uint64_t kib = 0;
    // The kernel writes every figure in kB (KiB).
    if (absl::ConsumeSuffix(&line, "kB") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) && kib < (uint64_t{1} << 53)) {
      *field = kib * 1024;
    }
  }
  uint64_t limit = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ToAbsl(cgroup_limit)), &limit) && limit > 0) {
    // cgroup v1 writes a huge number for "no limit"; the min leaves that one without effect.
    if (m.total == 0 || limit < m.total) m.total = limit;
    if (m.available > m.total) m.available = m.total;
  }
  return m;
}

HostMemory ReadHostMemory() {
  auto slurp = [](const char* path) {
    std::ifstream in(path);
    std::stringstream text;
    if (in) text << in.rdbuf();
    return text.str();
  };
  std::string limit = slurp("/sys/fs/cgroup/memory.max");                           // cgroup v2
  if (limit.empty()) limit = slurp("/sys/fs/cgroup/memory/memory.limit_in_bytes");  // v1
  return ParseHostMemory(slurp("/proc/meminfo"), limit);
}

std::vector<v1::GpuInfo> DetectGpus() {
  std::vector<v1::GpuInfo> gpus;
#ifdef RINGMASTER_AGENT_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return gpus;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    v1::GpuInfo g;
    g.set_index(static_cast<uint32_t>(i));
    g.set_name(p.name);
    g.set_memory_bytes(p.totalGlobalMem);
    g.set_compute_capability_major(static_cast<uint32_t>(p.major));
    g.set_compute_capability_minor(static_cast<uint32_t>(p.minor));
    g.set_tensor_cores(p.major >= 7);
    std::string uuid = "GPU-";
    for (int b = 0; b < 16; ++b) {
      absl::StrAppend(&uuid,
                      absl::Hex(static_cast<unsigned char>(p.uuid.bytes[b]), absl::kZeroPad2));
      if (b == 3 || b == 5 || b == 7 || b == 9) uuid += "-";
    }
    g.set_uuid(uuid);
    gpus.push_back(std::move(g));
  }
#endif
  return gpus;
}

absl::StatusOr<v1::NodeInventory> CollectInventory(const InventoryOptions& options) {
  v1::NodeInventory inv;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) {
    return absl::InternalError("gethostname failed");
  }
  inv.set_hostname(host);
  inv.set_node_name(options.node_name.empty() ? std::string(host) : options.node_name);
  inv.set_rack(options.rack);
  std::vector<std::string> addrs = options.addresses.empty() ? HostAddresses() : options.addresses;
  if (addrs.empty()) addrs.push_back(host);
  for (const std::string& a : addrs) inv.add_addresses(a);
  const unsigned cores = std::thread::hardware_concurrency();
  inv.set_cpu_cores(cores == 0 ? 1 : cores);
  const HostMemory memory = ReadHostMemory();
  inv.set_host_memory_total_bytes(memory.total);
  inv.set_host_memory_available_bytes(memory.available);
  std::vector<v1::GpuInfo> gpus;
  if (!options.gpu_override.empty()) {
    absl::StatusOr<std::vector<v1::GpuInfo>> o = ParseGpuOverride(options.gpu_override);
    if (!o.ok()) return o.status();
    gpus = *std::move(o);
  } else {
    gpus = DetectGpus();
  }
  for (v1::GpuInfo& g : gpus) *inv.add_gpus() = std::move(g);
  return inv;
}

}  // namespace ringmaster::agent
