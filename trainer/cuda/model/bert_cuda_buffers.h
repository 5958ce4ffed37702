// The CUDA BERT's activation arena: the buffers CudaBertModel lays out in one device allocation
// per shape (bert_cuda_arena.cc) and its forward and backward use (bert_cuda_model.cc). Private
// to those two files. Letters as in bert_cuda_model.h.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/cuda/model/bert_cuda_model.h"

namespace ringmaster::trainer::cuda {

// One encoder layer's activations. With gradient checkpointing every layer's pointers other than
// x name the same buffers: forward overwrites them layer after layer and backward recomputes them.
struct CudaBertModel::LayerActs {
  float* x = nullptr;    // (N, H) layer input
  float* qkv = nullptr;  // (N, 3H) the Q, K, V projection, read in place by the fused attention
  // (BH, S, 2) the fused attention's row max and row sum (flash_attention.h): what its backward
  // needs to recompute the probabilities. No S×S tensor is kept; attention dropout's masks are
  // regenerated from the counter RNG.
  float* attn_stats = nullptr;
  float* ctx = nullptr;        // (N, H) attention context, rows
  float* attn_mask = nullptr;  // (N, H) when hidden dropout is on
  float *ln1_in = nullptr, *ln1_mean = nullptr, *ln1_rstd = nullptr, *h1 = nullptr;
  float *u = nullptr, *g = nullptr;  // (N, I) pre- and post-GELU
  float* ffn_mask = nullptr;         // (N, H)
  float *ln2_in = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr;
};

struct CudaBertModel::Buffers {
  int32_t *ids = nullptr, *types = nullptr;  // (N)
  float* mask_bias = nullptr;                // (N)
  float* labels = nullptr;                   // (B)
  float *emb_sum = nullptr, *emb_mean = nullptr, *emb_rstd = nullptr, *emb_mask = nullptr;
  std::vector<LayerActs> layers;
  float* final_out = nullptr;                        // (N, H)
  float *pooled = nullptr, *pooled_d = nullptr;      // (B, H)
  float *pooled_mask = nullptr, *dpooled = nullptr;  // (B, H)
  float *logits = nullptr, *dlogits = nullptr;       // (B, C)
  float* losses = nullptr;                           // (B)
  // Scratch shared by all layers.
  float *dA = nullptr, *dB = nullptr, *dC = nullptr;  // (N, H)
  float* dI = nullptr;                                // (N, I)
  float* dqkv = nullptr;                              // (N, 3H)
  float* attn_dsum = nullptr;  // (BH, S) rowsum(dO ⊙ O), attention backward
  float* ln_scratch = nullptr;
  float* bias_scratch = nullptr;
  float* recompute_out = nullptr;  // (N, H) with checkpointing: the recomputed layer's output
};

}  // namespace ringmaster::trainer::cuda
