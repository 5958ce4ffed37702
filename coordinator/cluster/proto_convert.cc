// Plain types <-> ringmaster.v1 messages.
#include "coordinator/cluster/proto_convert.h"

#include <cstdint>

namespace ringmaster::coordinator {

NodeInventory InventoryFromProto(const v1::NodeInventory& p) {
  NodeInventory inv;
  inv.node_name = p.node_name();
  inv.hostname = p.hostname();
  inv.addresses.assign(p.addresses().begin(), p.addresses().end());
  inv.rack = p.rack();
  inv.cpu_cores = static_cast<int>(p.cpu_cores());
  inv.trainer_samples_per_second = p.trainer_samples_per_second();
  inv.host_memory_total_bytes = p.host_memory_total_bytes();
  inv.host_memory_available_bytes = p.host_memory_available_bytes();
  for (const v1::GpuInfo& g : p.gpus()) {
    GpuInfo gpu;
    gpu.index = static_cast<int>(g.index());
    gpu.name = g.name();
    gpu.memory_bytes = g.memory_bytes();
    gpu.cc_major = static_cast<int>(g.compute_capability_major());
    gpu.cc_minor = static_cast<int>(g.compute_capability_minor());
    gpu.tensor_cores = g.tensor_cores();
    inv.gpus.push_back(std::move(gpu));
  }
  return inv;
}

v1::NodeInventory InventoryToProto(const NodeInventory& inv) {
  v1::NodeInventory p;
  p.set_node_name(inv.node_name);
  p.set_hostname(inv.hostname);
  for (const std::string& a : inv.addresses) p.add_addresses(a);
  p.set_rack(inv.rack);
  p.set_cpu_cores(static_cast<uint32_t>(inv.cpu_cores));
  p.set_trainer_samples_per_second(inv.trainer_samples_per_second);
  p.set_host_memory_total_bytes(inv.host_memory_total_bytes);
  p.set_host_memory_available_bytes(inv.host_memory_available_bytes);
  for (const GpuInfo& g : inv.gpus) {
    v1::GpuInfo* gpu = p.add_gpus();
    gpu->set_index(static_cast<uint32_t>(g.index));
    gpu->set_name(g.name);
    gpu->set_memory_bytes(g.memory_bytes);
    gpu->set_compute_capability_major(static_cast<uint32_t>(g.cc_major));
    gpu->set_compute_capability_minor(static_cast<uint32_t>(g.cc_minor));
    gpu->set_tensor_cores(g.tensor_cores);
  }
  return p;
}

v1::JobPhase PhaseToProto(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return v1::JOB_PHASE_PENDING;
    case JobPhase::kRendezvous:
      return v1::JOB_PHASE_RENDEZVOUS;
    case JobPhase::kRunning:
      return v1::JOB_PHASE_RUNNING;
    case JobPhase::kRestarting:
      return v1::JOB_PHASE_RESTARTING;
    case JobPhase::kSucceeded:
      return v1::JOB_PHASE_SUCCEEDED;
    case JobPhase::kFailed:
      return v1::JOB_PHASE_FAILED;
    case JobPhase::kCancelled:
      return v1::JOB_PHASE_CANCELLED;
  }
  return v1::JOB_PHASE_UNSPECIFIED;
}

v1::FailureKind FailureKindToProto(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return v1::FAILURE_KIND_UNSPECIFIED;
    case FailureKind::kRankExited:
      return v1::FAILURE_KIND_RANK_EXITED;
    case FailureKind::kNodeLost:
      return v1::FAILURE_KIND_NODE_LOST;
    case FailureKind::kHung:
      return v1::FAILURE_KIND_HUNG;
    case FailureKind::kDeterministicStartup:
      return v1::FAILURE_KIND_DETERMINISTIC_STARTUP;
    case FailureKind::kRendezvousTimeout:
      return v1::FAILURE_KIND_RENDEZVOUS_TIMEOUT;
    case FailureKind::kPlanning:
      return v1::FAILURE_KIND_PLANNING;
    case FailureKind::kDiverged:
      return v1::FAILURE_KIND_DIVERGED;
  }
  return v1::FAILURE_KIND_UNSPECIFIED;
}

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t ns = absl::ToUnixNanos(t);
  int64_t s = ns / 1'000'000'000;
  int64_t n = ns % 1'000'000'000;
  if (n < 0) {
    n += 1'000'000'000;
    s -= 1;
  }
  out->set_seconds(s);
  out->set_nanos(static_cast<int32_t>(n));
}

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1'000'000'000);
  out->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));  // same sign as seconds
}

absl::Duration DurationFromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::Time TimeFromProto(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return absl::InfinitePast();
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

RankTrace TraceFromProto(const v1::RankProgress& report) {
  RankTrace t;
  t.has_trace = report.has_trace();
  t.collective_seq = report.collective_seq();
  t.collective_op = report.collective_op();
  t.in_collective = report.in_collective();
  t.entered_at = TimeFromProto(report.collective_entered_at());
  t.process_stopped = report.process_stopped();
  return t;
}

void StallToProto(const StallDiagnosis& stall, v1::CollectiveStall* out) {
  out->set_seq(stall.seq);
  out->set_op(stall.op);
  for (int r : stall.missing) out->add_missing_ranks(static_cast<uint32_t>(r));
  for (int r : stall.waiting) out->add_waiting_ranks(static_cast<uint32_t>(r));
  SetDuration(stall.waited, out->mutable_waited());
}

}  // namespace ringmaster::coordinator
