#include "jobspec/default_job.h"

namespace ringmaster::trainer {

std::string DefaultDemoJobYaml() {
  // Written as a user would write it, so that it doubles as an example job. vocab_size is left
  // out on purpose: it follows the generated vocab.txt.
  return R"yaml(# Ringmaster demo job: a small BERT trained from scratch on the generated demo data.
name: demo
model:
  config:
    hidden_size: 128
    num_hidden_layers: 2
    num_attention_heads: 4
    intermediate_size: 512
    max_position_embeddings: 64
    hidden_dropout_prob: 0.1
    attention_probs_dropout_prob: 0.1
  vocab: runs/demo/data/vocab.txt
  num_labels: 2
data:
  train: runs/demo/data/train.tsv
  eval: runs/demo/data/dev.tsv
  max_seq_len: 64
  shuffle: true
train:
  epochs: 8
  global_batch_size: 32
  micro_batch_size: 32
  # From scratch a small model wants a far larger step than fine-tuning's 2e-5.
  lr: 5.0e-4
  lr_schedule: linear
  warmup_ratio: 0.06
  weight_decay: 0.01
  seed: 42
output:
  dir: runs/demo
  checkpoint_every_steps: 200
)yaml";
}

}  // namespace ringmaster::trainer
