// Conversions between the coordinator's plain types and the ringmaster.v1 messages, in one
// place so that the logic files read like logic.
#pragma once

#include "absl/time/time.h"
#include "coordinator/state/hang_diagnosis.h"
#include "coordinator/state/job_state.h"
#include "coordinator/state/node_inventory.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "ringmaster/v1/agent.pb.h"
#include "ringmaster/v1/types.pb.h"

namespace ringmaster::coordinator {

NodeInventory InventoryFromProto(const v1::NodeInventory& proto);
v1::NodeInventory InventoryToProto(const NodeInventory& inventory);

v1::JobPhase PhaseToProto(JobPhase phase);
v1::FailureKind FailureKindToProto(FailureKind kind);

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out);
void SetDuration(absl::Duration d, google::protobuf::Duration* out);
absl::Duration DurationFromProto(const google::protobuf::Duration& d);
// An unset timestamp (zero) is absl::InfinitePast().
absl::Time TimeFromProto(const google::protobuf::Timestamp& t);

// The collective trace fields of a rank's report.
RankTrace TraceFromProto(const v1::RankProgress& report);
void StallToProto(const StallDiagnosis& stall, v1::CollectiveStall* out);

}  // namespace ringmaster::coordinator
