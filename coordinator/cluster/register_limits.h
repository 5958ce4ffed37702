// Caps on the fields of a RegisterRequest that the node-name and address checks in
// Cluster::Register do not cover (issue #31): the GPU list and each GPU's name and uuid, the
// agent's build string, and the previous id and secret. A registration is stored, listed by
// ListNodes and kept for --forget-lost-after, so without them one join-token holder's Register
// of a few MiB grew the coordinator by megabytes a call and two of them pushed a ListNodes page
// past the client's 4 MiB receive limit.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "ringmaster/v1/agent.pb.h"

namespace ringmaster::coordinator {

inline constexpr size_t kMaxGpusPerNode = 64;
inline constexpr size_t kMaxGpuTextBytes = 256;        // GpuInfo.name, GpuInfo.uuid
inline constexpr size_t kMaxBuildTextBytes = 256;      // ApiVersion.build
inline constexpr size_t kMaxPreviousFieldBytes = 256;  // previous_node_id, previous_node_secret

// InvalidArgument naming the field, its size and the limit when one is over its cap (or holds a
// control character); OK otherwise.
absl::Status CheckRegisterLimits(const v1::RegisterRequest& request);

}  // namespace ringmaster::coordinator
