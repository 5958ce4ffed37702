#include "coordinator/bench/sim_agents.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace ringmaster::bench_scale {

void HeartbeatStream::Start() {
  agent_->stub->async()->Heartbeat(&ctx_, this);
  v1::AgentMessage first;
  first.set_node_id(agent_->node_id);
  first.set_node_secret(agent_->register_response.node_secret());
  first.set_seq(++seq_);
  const absl::Time now = absl::Now();
  first.mutable_sent_at()->set_seconds(absl::ToUnixSeconds(now));
  first.mutable_sent_at()->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(now - absl::FromUnixSeconds(absl::ToUnixSeconds(now)))));
  Send(std::move(first));
  StartRead(&in_);
  StartCall();
}
void HeartbeatStream::OnWriteDone(bool ok) {
  bool first = false;
  v1::AgentMessage* next = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    first = !first_done_;
    first_done_ = true;
    writing_.pop_front();
    if (ok && !writing_.empty()) next = &writing_.front();
  }
  if (first) run_->Count(&Run::first_written);
  if (next != nullptr) StartWrite(next);
}

void HeartbeatStream::OnReadDone(bool ok) {
  if (!ok) return;  // OnDone follows
  if (in_.has_start_ranks()) {
    const auto now = Clock::now();
    const uint64_t id = in_.command_id();
    ++agent_->start_messages;
    if (!agent_->start) {
      agent_->start = std::move(*in_.mutable_start_ranks());
      agent_->start_command_id = id;
      agent_->start_at = now;
      {
        std::lock_guard<std::mutex> l(run_->mu);
        ++run_->assigned;
        run_->last_assigned = std::max(run_->last_assigned, now);
        run_->first_assigned = std::min(run_->first_assigned, now);
        run_->cv.notify_all();
      }
    }
    if (run_->flags.ack) {
      // What the real agent does next: acknowledge the command it carried out.
      v1::AgentMessage ack;
      ack.set_node_id(agent_->node_id);
      ack.set_seq(++seq_);
      ack.add_acked_command_ids(id);
      Send(std::move(ack));
    }
  }
  in_.Clear();
  StartRead(&in_);
}

void HeartbeatStream::OnDone(const grpc::Status& s) {
  std::lock_guard<std::mutex> l(run_->mu);
  if (!s.ok() && !agent_->start && s.error_code() != grpc::StatusCode::CANCELLED) {
    agent_->error = absl::StrCat("heartbeat stream: ", s.error_message());
    ++run_->streams_failed;
  }
  ++run_->streams_done;
  run_->cv.notify_all();
}

void HeartbeatStream::Send(v1::AgentMessage m) {
  v1::AgentMessage* start = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    writing_.push_back(std::move(m));
    if (writing_.size() == 1) start = &writing_.front();
  }
  if (start != nullptr) StartWrite(start);
}

void Run::StartRegister(int i) {
  SimAgent* a = agents[static_cast<size_t>(i)].get();
  a->register_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  a->register_ctx.set_wait_for_ready(true);
  a->stub->async()->Register(&a->register_ctx, &a->register_request, &a->register_response,
                             [this, a](grpc::Status s) {
                               bool ok = s.ok();
                               if (ok) {
                                 a->node_id = a->register_response.node_id();
                                 {
                                   std::lock_guard<std::mutex> l(mu);
                                   ++streams_started;
                                 }
                                 streams[static_cast<size_t>(a->index)]->Start();
                               } else {
                                 a->error = absl::StrCat("register: ", s.error_message());
                               }
                               {
                                 std::lock_guard<std::mutex> l(mu);
                                 ++registered;
                                 if (!ok) ++register_failed;
                                 cv.notify_all();
                               }
                               const int next = next_register.fetch_add(1);
                               if (next < n) StartRegister(next);
                             });
}

// Node i of n: racks of `per_rack` nodes, "gpu-r017-n05" style names, 10.R.N.1 addresses.
v1::NodeInventory MakeInventory(int i, int gpus, int per_rack) {
  const int rack = i / per_rack, slot = i % per_rack;
  v1::NodeInventory inv;
  const std::string host = absl::StrFormat("gpu-r%03d-n%02d.dc1.example", rack, slot);
  inv.set_node_name(host);
  inv.set_hostname(host);
  inv.add_addresses(absl::StrFormat("10.%d.%d.%d", 1 + rack / 250, rack % 250, 10 + slot));
  inv.set_rack(absl::StrFormat("rack-%03d", rack));
  inv.set_cpu_cores(128);
  for (int g = 0; g < gpus; ++g) {
    v1::GpuInfo* gpu = inv.add_gpus();
    gpu->set_index(static_cast<uint32_t>(g));
    gpu->set_name("NVIDIA A100-SXM4-80GB");
    gpu->set_memory_bytes(uint64_t{80} << 30);
    gpu->set_compute_capability_major(8);
    gpu->set_compute_capability_minor(0);
    gpu->set_tensor_cores(true);
    gpu->set_uuid(absl::StrFormat("GPU-%08x-%04x-4000-8000-%012x", i, g, i * 64 + g));
  }
  return inv;
}

}  // namespace ringmaster::bench_scale
