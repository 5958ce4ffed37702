// Whether the plan bench_scale's agents received is the one the planner promises: every global
// rank once, contiguous ranks per node in topology order (rack, hostname), local ranks and GPU
// indices 0..gpus-1, the torchrun environment and MASTER_ADDR naming rank 0's node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/bench/sim_agents.h"

namespace ringmaster::bench_scale {

// The job bench_scale submits: `n` nodes x `gpus` ranks of BERT-base on CUDA.
std::string JobYaml(int n, int gpus);

// Empty when every check passes; otherwise the first problems found.
std::vector<std::string> Verify(const Run& run, const std::string& job_id, int64_t generation);

}  // namespace ringmaster::bench_scale
