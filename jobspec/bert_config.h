// BertConfig: the Hugging Face config.json fields the model uses, and its JSON form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer {

struct BertConfig {
  int vocab_size = 30522;
  int hidden_size = 768;
  int num_hidden_layers = 12;
  int num_attention_heads = 12;
  int intermediate_size = 3072;
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  int num_labels = 2;
  int pad_token_id = 0;
  float hidden_dropout_prob = 0.1f;
  float attention_probs_dropout_prob = 0.1f;
  float layer_norm_eps = 1e-12f;
  float initializer_range = 0.02f;
  std::string hidden_act = "gelu";  // only exact (erf) "gelu" is supported
  // Optional label names (id2label); empty means LABEL_0..LABEL_{n-1}.
  std::vector<std::string> id2label;

  int head_dim() const { return hidden_size / num_attention_heads; }
};

// Checks ranges and divisibility; errors start with `source` (a file name or key path).
absl::Status ValidateBertConfig(const BertConfig& c, std::string_view source);

// Parses a Hugging Face config.json. Required: vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size. Others default as in BertConfig. num_labels comes
// from `num_labels` or the size of `id2label`. Errors name `source` and the field.
absl::StatusOr<BertConfig> ParseBertConfigJson(std::string_view json, std::string_view source);

// config.json that `transformers` loads as BertForSequenceClassification.
std::string BertConfigToJson(const BertConfig& c);

}  // namespace ringmaster::trainer
