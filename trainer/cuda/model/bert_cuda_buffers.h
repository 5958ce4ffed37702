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
  float* x = nullptr;                  // (N, H) layer input
  float *qh = nullptr, *kh = nullptr;  // (BH, S, D) each
  float* vh = nullptr;                 // (BH, S, D)
  float* probs = nullptr;              // (BH, S, S) softmax output, before dropout
  float* probs_mask = nullptr;         // (BH, S, S) when attention dropout is on
  float* ctx = nullptr;                // (N, H) attention context, rows
  float* attn_mask = nullptr;          // (N, H) when hidden dropout is on
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
  float* qkv = nullptr;                                  // (N, 3H)
  float* pdrop = nullptr;                                // (BH, S, S)
  float* heads = nullptr;                                // (BH, S, D) context / its gradient
  float *dA = nullptr, *dB = nullptr, *dC = nullptr;     // (N, H)
  float* dI = nullptr;                                   // (N, I)
  float* dqkv = nullptr;                                 // (N, 3H)
  float *dqh = nullptr, *dkh = nullptr, *dvh = nullptr;  // (BH, S, D)
  float* dp = nullptr;                                   // (BH, S, S)
  float* ln_scratch = nullptr;
  float* bias_scratch = nullptr;
  float* recompute_out = nullptr;  // (N, H) with checkpointing: the recomputed layer's output
};

}  // namespace ringmaster::trainer::cuda
