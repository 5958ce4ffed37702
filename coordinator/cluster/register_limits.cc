// CheckRegisterLimits: size caps on a Register's inventory fields.
#include "coordinator/cluster/register_limits.h"

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/absl_view.h"

namespace ringmaster::coordinator {
namespace {

absl::Status CheckField(std::string_view what, std::string_view value, size_t max) {
  if (value.size() > max) {
    return absl::InvalidArgumentError(absl::StrCat("register: ", ToAbsl(what), " is ", value.size(),
                                                   " bytes; at most ", max, " are accepted"));
  }
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("register: ", ToAbsl(what), " holds a control character (byte 0x",
                       absl::Hex(u, absl::kZeroPad2), "); none are accepted"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRegisterLimits(const v1::RegisterRequest& request) {
  const v1::NodeInventory& inv = request.inventory();
  if (static_cast<size_t>(inv.gpus_size()) > kMaxGpusPerNode) {
    return absl::InvalidArgumentError(absl::StrCat("register: ", inv.gpus_size(), " GPUs; at most ",
                                                   kMaxGpusPerNode, " are accepted"));
  }
  for (int i = 0; i < inv.gpus_size(); ++i) {
    const v1::GpuInfo& g = inv.gpus(i);
    if (absl::Status st = CheckField(absl::StrCat("GPU ", i, " name"), g.name(), kMaxGpuTextBytes);
        !st.ok()) {
      return st;
    }
    if (absl::Status st = CheckField(absl::StrCat("GPU ", i, " uuid"), g.uuid(), kMaxGpuTextBytes);
        !st.ok()) {
      return st;
    }
  }
  if (absl::Status st =
          CheckField("agent_version.build", request.agent_version().build(), kMaxBuildTextBytes);
      !st.ok()) {
    return st;
  }
  if (absl::Status st =
          CheckField("previous_node_id", request.previous_node_id(), kMaxPreviousFieldBytes);
      !st.ok()) {
    return st;
  }
  return CheckField("previous_node_secret", request.previous_node_secret(), kMaxPreviousFieldBytes);
}

}  // namespace ringmaster::coordinator
