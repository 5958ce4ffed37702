#include "common/metrics_server.h"
#include "common/trainer_metrics.h"

namespace ringmaster::trainer {
namespace {

class NullMetrics : public TrainerMetrics {
 public:
  void OnStart(int, int64_t) override {}
  void OnStep(const StepFigures&, const CommTotals&) override {}
  void OnEval(double, double) override {}
  void OnCheckpoint(double, uint64_t) override {}
  void OnMemory(uint64_t, uint64_t) override {}
  void OnDevice(const DeviceFigures&) override {}
};

}  // namespace

std::unique_ptr<TrainerMetrics> MakeNullMetrics() { return std::make_unique<NullMetrics>(); }

#ifndef RINGMASTER_HAVE_PROMETHEUS
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeRankMetrics(
    const std::string& listen, const RankStatus*,
    std::vector<std::pair<std::string, std::string>>) {
  return absl::UnimplementedError("metrics on " + listen +
                                  " requested, but this build has no prometheus-cpp");
}
#endif

}  // namespace ringmaster::trainer
