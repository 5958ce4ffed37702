// Fuzzes the Hugging Face config.json parser (jobspec/bert_config). Properties: any input
// is refused with a Status or parsed; a parsed config that validates is written back by
// BertConfigToJson to JSON that parses to the same config.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_check.h"
#include "jobspec/bert_config.h"

namespace rt = ringmaster::trainer;

namespace {

bool SameFloat(float a, float b) { return a == b || (a != a && b != b); }

// The label names a config stands for: no id2label means LABEL_0..LABEL_{n-1}, which is what
// BertConfigToJson writes out.
std::vector<std::string> Labels(const rt::BertConfig& c) {
  if (!c.id2label.empty()) return c.id2label;
  std::vector<std::string> names;
  for (int i = 0; i < c.num_labels; ++i) names.push_back("LABEL_" + std::to_string(i));
  return names;
}

bool Same(const rt::BertConfig& a, const rt::BertConfig& b) {
  return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.num_hidden_layers == b.num_hidden_layers &&
         a.num_attention_heads == b.num_attention_heads &&
         a.intermediate_size == b.intermediate_size &&
         a.max_position_embeddings == b.max_position_embeddings &&
         a.type_vocab_size == b.type_vocab_size && a.num_labels == b.num_labels &&
         a.pad_token_id == b.pad_token_id &&
         SameFloat(a.hidden_dropout_prob, b.hidden_dropout_prob) &&
         SameFloat(a.attention_probs_dropout_prob, b.attention_probs_dropout_prob) &&
         SameFloat(a.layer_norm_eps, b.layer_norm_eps) &&
         SameFloat(a.initializer_range, b.initializer_range) && a.hidden_act == b.hidden_act &&
         Labels(a) == Labels(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<rt::BertConfig> config = rt::ParseBertConfigJson(text, "config.json");
  if (!config.ok()) return 0;
  if (!rt::ValidateBertConfig(*config, "config.json").ok()) return 0;
  const std::string json = rt::BertConfigToJson(*config);
  absl::StatusOr<rt::BertConfig> again = rt::ParseBertConfigJson(json, "written config.json");
  FUZZ_CHECK(again.ok(), "a written config parses");
  FUZZ_CHECK(Same(*config, *again), "a written config reads back the same");
  return 0;
}
