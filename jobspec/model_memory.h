// What a job's model state costs per rank, estimated before anything is launched: fp32
// parameters, gradients and the two AdamW moments (16 bytes per parameter), divided as the
// job's sharding divides them. Activations, buffers and the runtime come on top, so the figure
// is a lower bound: a job over it cannot run, one under it may still not fit.
#pragma once

#include <cstdint>

#include "jobspec/bert_config.h"
#include "jobspec/job_settings.h"

namespace ringmaster::trainer {

// A rank's model state may not exceed this at any world size the job can get (checked when the
// job spec is validated, i.e. at submission): 256 GiB, more than any one GPU or sensible CPU
// rank holds.
inline constexpr uint64_t kMaxModelStateBytesPerRank = uint64_t{256} << 30;

// Parameters of BertForSequenceClassification with config `c` (embeddings, encoder layers,
// pooler, classifier). Exact for the dimensions ValidateBertConfig accepts; no overflow there.
uint64_t BertParameterCount(const BertConfig& c);

// Bytes of model state one rank holds for `params` parameters in a world of `world_size` ranks
// with `procs_per_node` ranks per node (used by hybrid_shard, which shards within a node).
// no_shard: everything on every rank; shard_grad_op: parameters whole, gradients and moments
// sharded; full_shard: all sharded; hybrid_shard: all sharded over the node's ranks.
uint64_t ModelStateBytesPerRank(uint64_t params, jobspec::Sharding sharding, int world_size,
                                int procs_per_node);

}  // namespace ringmaster::trainer
