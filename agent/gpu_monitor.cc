#include "agent/gpu_monitor.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace ringmaster::agent {
namespace {

// The few NVML declarations used, as the library's ABI defines them (no nvml.h needed to build).
using NvmlReturn = int;  // NVML_SUCCESS = 0
constexpr NvmlReturn kNvmlSuccess = 0;
using NvmlDevice = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
struct NvmlUtilization {
  unsigned int gpu, memory;  // percent
};

class NvmlMonitor : public GpuMonitor {
 public:
  static absl::StatusOr<std::unique_ptr<GpuMonitor>> Open() {
    void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return absl::NotFoundError("NVML (libnvidia-ml.so.1) not found: no NVIDIA driver here");
    }
    std::unique_ptr<NvmlMonitor> m(new NvmlMonitor(lib));
    if (absl::Status s = m->Resolve(); !s.ok()) return s;
    if (NvmlReturn r = m->init_(); r != kNvmlSuccess) {
      return absl::UnavailableError(absl::StrCat("nvmlInit_v2 failed with NVML error ", r));
    }
    m->initialised_ = true;
    return std::unique_ptr<GpuMonitor>(std::move(m));
  }

  ~NvmlMonitor() override {
    if (initialised_) shutdown_();
    ::dlclose(lib_);
  }

  std::vector<GpuReading> Read() override {
    std::vector<GpuReading> out;
    unsigned int count = 0;
    if (count_(&count) != kNvmlSuccess) return out;
    for (unsigned int i = 0; i < count; ++i) {
      NvmlDevice dev = nullptr;
      NvmlMemory mem{};
      if (handle_(i, &dev) != kNvmlSuccess || memory_(dev, &mem) != kNvmlSuccess) continue;
      GpuReading g;
      g.index = static_cast<int>(i);
      g.memory_used_bytes = mem.used;
      g.memory_total_bytes = mem.total;
      char uuid[96] = {};
      if (uuid_(dev, uuid, sizeof(uuid)) == kNvmlSuccess) g.uuid = uuid;
      NvmlUtilization util{};
      if (utilization_(dev, &util) == kNvmlSuccess) g.utilization = util.gpu / 100.0;
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  explicit NvmlMonitor(void* lib) : lib_(lib) {}

  template <typename Fn>
  absl::Status Sym(const char* name, Fn* out) {
    *out = reinterpret_cast<Fn>(::dlsym(lib_, name));
    if (*out == nullptr) return absl::UnavailableError(absl::StrCat("NVML lacks ", name));
    return absl::OkStatus();
  }

  absl::Status Resolve() {
    for (absl::Status s :
         {Sym("nvmlInit_v2", &init_), Sym("nvmlShutdown", &shutdown_),
          Sym("nvmlDeviceGetCount_v2", &count_), Sym("nvmlDeviceGetHandleByIndex_v2", &handle_),
          Sym("nvmlDeviceGetMemoryInfo", &memory_), Sym("nvmlDeviceGetUUID", &uuid_),
          Sym("nvmlDeviceGetUtilizationRates", &utilization_)}) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  void* lib_;
  bool initialised_ = false;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*count_)(unsigned int*) = nullptr;
  NvmlReturn (*handle_)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*uuid_)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization_)(NvmlDevice, NvmlUtilization*) = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GpuMonitor>> OpenNvmlMonitor() { return NvmlMonitor::Open(); }

}  // namespace ringmaster::agent
