// The prometheus-cpp implementation of MetricsServer (built only with prometheus-cpp).
#include "common/metrics_server.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"
#include "common/figures_exposition.h"
#include "common/log.h"

namespace ringmaster::trainer {
namespace {

class StatusCollectable : public prometheus::Collectable {
 public:
  StatusCollectable(const RankStatus* status,
                    std::vector<std::pair<std::string, std::string>> labels)
      : status_(status), labels_(std::move(labels)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    return TrainerFamilies({{labels_, status_->Snapshot()}}, now);
  }

 private:
  const RankStatus* status_;
  std::vector<std::pair<std::string, std::string>> labels_;
};

class PrometheusServer final : public MetricsServer {
 public:
  PrometheusServer(std::unique_ptr<prometheus::Exposer> exposer,
                   std::shared_ptr<prometheus::Collectable> collectable)
      : exposer_(std::move(exposer)), collectable_(std::move(collectable)) {
    exposer_->RegisterCollectable(collectable_);
  }
  ~PrometheusServer() override {
    exposer_->RemoveCollectable(collectable_);
    exposer_.reset();  // stops serving before the collectable goes
  }

  int port() const override {
    const std::vector<int> ports = exposer_->GetListeningPorts();
    return ports.empty() ? 0 : ports[0];
  }

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> collectable_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeCollectable(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> collectable) {
  try {
    auto server = std::make_unique<PrometheusServer>(
        std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1), std::move(collectable));
    const std::string host = listen.substr(0, listen.rfind(':'));
    LogInfo(absl::StrCat("metrics on http://", host, ":", server->port(), "/metrics"));
    return std::unique_ptr<MetricsServer>(std::move(server));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeRankMetrics(
    const std::string& listen, const RankStatus* status,
    std::vector<std::pair<std::string, std::string>> labels) {
  return ServeCollectable(listen, std::make_shared<StatusCollectable>(status, std::move(labels)));
}

}  // namespace ringmaster::trainer
