#include "jobspec/bert_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

constexpr char kSource[] = "dir/config.json";

// The five required fields with non-default values, plus whatever `extra` adds.
std::string ConfigWith(const nlohmann::json& extra) {
  nlohmann::json j = {{"vocab_size", 100},
                      {"hidden_size", 32},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 4},
                      {"intermediate_size", 64}};
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    if (it.value().is_null() && it.key().rfind("drop:", 0) == 0) {
      j.erase(it.key().substr(5));
    } else {
      j[it.key()] = it.value();
    }
  }
  return j.dump();
}

BertConfig Tiny() {
  BertConfig c;
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 64;
  c.num_labels = 3;
  return c;
}

void ExpectError(const absl::Status& s, const std::string& what) {
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(kSource));
  EXPECT_THAT(std::string(s.message()), HasSubstr(what));
}

TEST(ParseBertConfigJson, RequiredFieldsAndDefaults) {
  absl::StatusOr<BertConfig> c = ParseBertConfigJson(ConfigWith({}), kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 100);
  EXPECT_EQ(c->hidden_size, 32);
  EXPECT_EQ(c->num_hidden_layers, 2);
  EXPECT_EQ(c->num_attention_heads, 4);
  EXPECT_EQ(c->intermediate_size, 64);
  EXPECT_EQ(c->head_dim(), 8);
  const BertConfig d;
  EXPECT_EQ(c->max_position_embeddings, d.max_position_embeddings);
  EXPECT_EQ(c->type_vocab_size, d.type_vocab_size);
  EXPECT_EQ(c->num_labels, 2);
  EXPECT_EQ(c->pad_token_id, 0);
  EXPECT_FLOAT_EQ(c->hidden_dropout_prob, 0.1f);
  EXPECT_FLOAT_EQ(c->layer_norm_eps, 1e-12f);
  EXPECT_EQ(c->hidden_act, "gelu");
  EXPECT_TRUE(c->id2label.empty());
}

TEST(ParseBertConfigJson, ReadsOptionalFields) {
  absl::StatusOr<BertConfig> c =
      ParseBertConfigJson(ConfigWith({{"max_position_embeddings", 128},
                                      {"type_vocab_size", 1},
                                      {"pad_token_id", 3},
                                      {"hidden_dropout_prob", 0.25},
                                      {"attention_probs_dropout_prob", 0},
                                      {"layer_norm_eps", 1e-5},
                                      {"initializer_range", 0.5}}),
                          kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_position_embeddings, 128);
  EXPECT_EQ(c->type_vocab_size, 1);
  EXPECT_EQ(c->pad_token_id, 3);
  EXPECT_FLOAT_EQ(c->hidden_dropout_prob, 0.25f);
  EXPECT_FLOAT_EQ(c->attention_probs_dropout_prob, 0.0f);
  EXPECT_FLOAT_EQ(c->layer_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->initializer_range, 0.5f);
}

TEST(ParseBertConfigJson, IgnoresUnknownFields) {
  // A real bert-base-uncased config.json carries many fields the model does not use.
  absl::StatusOr<BertConfig> c =
      ParseBertConfigJson(ConfigWith({{"architectures", {"BertForMaskedLM"}},
                                      {"gradient_checkpointing", false},
                                      {"model_type", "bert"},
                                      {"position_embedding_type", "absolute"},
                                      {"transformers_version", "4.6.0.dev0"},
                                      {"use_cache", true},
                                      {"classifier_dropout", nullptr}}),
                          kSource);
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(ParseBertConfigJson, MissingRequiredFieldNamesIt) {
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size"}) {
    SCOPED_TRACE(field);
    absl::StatusOr<BertConfig> c =
        ParseBertConfigJson(ConfigWith({{std::string("drop:") + field, nullptr}}), kSource);
    ExpectError(c.status(), std::string("missing required field '") + field + "'");
  }
}

TEST(ParseBertConfigJson, WrongTypesNameTheField) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"hidden_size", "32"},       {"hidden_size", 32.5},
      {"vocab_size", true},        {"num_labels", "3"},
      {"pad_token_id", nullptr},   {"hidden_dropout_prob", "0.1"},
      {"layer_norm_eps", nullptr}, {"hidden_act", 1},
      {"id2label", {"a", "b"}},    {"id2label", {{"0", 1}}},
      {"vocab_size", 1e10},        {"max_position_embeddings", 4294967296LL},
  };
  for (const auto& [field, value] : cases) {
    SCOPED_TRACE(std::string(field) + "=" + value.dump());
    absl::StatusOr<BertConfig> c = ParseBertConfigJson(ConfigWith({{field, value}}), kSource);
    ExpectError(c.status(), std::string("'") + field + "'");
  }
}

TEST(ParseBertConfigJson, InvalidJsonNamesSource) {
  ExpectError(ParseBertConfigJson("{\"vocab_size\": 1,", kSource).status(), "invalid JSON");
  ExpectError(ParseBertConfigJson("[1, 2]", kSource).status(), "not a JSON object");
  ExpectError(ParseBertConfigJson("", kSource).status(), "invalid JSON");
}

TEST(ParseBertConfigJson, Id2LabelBecomesVectorAndSetsNumLabels) {
  absl::StatusOr<BertConfig> c = ParseBertConfigJson(
      ConfigWith({{"id2label", {{"2", "pos"}, {"0", "neg"}, {"1", "neu"}}}}), kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_labels, 3);
  EXPECT_THAT(c->id2label, ::testing::ElementsAre("neg", "neu", "pos"));
}

TEST(ParseBertConfigJson, ExplicitNumLabelsWins) {
  absl::StatusOr<BertConfig> c = ParseBertConfigJson(
      ConfigWith({{"num_labels", 5}, {"id2label", {{"0", "a"}, {"1", "b"}}}}), kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_labels, 5);
  EXPECT_TRUE(c->id2label.empty());  // names for 2 labels do not describe 5

  c = ParseBertConfigJson(ConfigWith({{"num_labels", 2}, {"id2label", {{"0", "a"}, {"1", "b"}}}}),
                          kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->id2label, ::testing::ElementsAre("a", "b"));

  c = ParseBertConfigJson(ConfigWith({{"num_labels", 1}}), kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_labels, 1);
}

TEST(ParseBertConfigJson, Id2LabelKeysMustBeZeroToNMinusOne) {
  for (const nlohmann::json& id2label :
       {nlohmann::json{{"1", "a"}, {"2", "b"}}, nlohmann::json{{"0", "a"}, {"01", "b"}},
        nlohmann::json{{"0", "a"}, {"-1", "b"}}, nlohmann::json{{"0", "a"}, {"x", "b"}},
        nlohmann::json{{"0", "a"}, {"+1", "b"}}}) {
    SCOPED_TRACE(id2label.dump());
    ExpectError(ParseBertConfigJson(ConfigWith({{"id2label", id2label}}), kSource).status(),
                "id2label");
  }
}

TEST(ParseBertConfigJson, RejectsArchitecturesItDoesNotImplement) {
  ExpectError(
      ParseBertConfigJson(ConfigWith({{"position_embedding_type", "relative_key"}}), kSource)
          .status(),
      "relative_key");
  ExpectError(ParseBertConfigJson(ConfigWith({{"model_type", "roberta"}}), kSource).status(),
              "roberta");
}

TEST(ParseBertConfigJson, ValidatesRanges) {
  ExpectError(ParseBertConfigJson(ConfigWith({{"num_attention_heads", 5}}), kSource).status(),
              "not a multiple of num_attention_heads 5");
  ExpectError(ParseBertConfigJson(ConfigWith({{"hidden_act", "gelu_new"}}), kSource).status(),
              "gelu_new");
}

TEST(ValidateBertConfig, AcceptsDefaultsAndTiny) {
  EXPECT_TRUE(ValidateBertConfig(BertConfig(), kSource).ok());
  EXPECT_TRUE(ValidateBertConfig(Tiny(), kSource).ok());
}

TEST(ValidateBertConfig, RejectsBadValues) {
  struct Case {
    const char* what;
    void (*mutate)(BertConfig&);
  };
  const Case cases[] = {
      {"vocab_size must be positive", [](BertConfig& c) { c.vocab_size = 0; }},
      {"hidden_size must be positive", [](BertConfig& c) { c.hidden_size = -32; }},
      {"num_hidden_layers must be positive", [](BertConfig& c) { c.num_hidden_layers = 0; }},
      {"num_attention_heads must be positive", [](BertConfig& c) { c.num_attention_heads = 0; }},
      {"intermediate_size must be positive", [](BertConfig& c) { c.intermediate_size = 0; }},
      {"max_position_embeddings must be positive",
       [](BertConfig& c) { c.max_position_embeddings = 0; }},
      {"type_vocab_size must be positive", [](BertConfig& c) { c.type_vocab_size = 0; }},
      {"not a multiple", [](BertConfig& c) { c.num_attention_heads = 3; }},
      {"hidden_dropout_prob", [](BertConfig& c) { c.hidden_dropout_prob = 1.0f; }},
      {"hidden_dropout_prob", [](BertConfig& c) { c.hidden_dropout_prob = -0.1f; }},
      {"attention_probs_dropout_prob",
       [](BertConfig& c) { c.attention_probs_dropout_prob = std::nanf(""); }},
      {"layer_norm_eps", [](BertConfig& c) { c.layer_norm_eps = 0.0f; }},
      {"initializer_range", [](BertConfig& c) { c.initializer_range = -1.0f; }},
      {"only exact (erf) \"gelu\"", [](BertConfig& c) { c.hidden_act = "relu"; }},
      {"num_labels must be >= 1", [](BertConfig& c) { c.num_labels = 0; }},
      {"pad_token_id 100", [](BertConfig& c) { c.pad_token_id = 100; }},
      {"pad_token_id -1", [](BertConfig& c) { c.pad_token_id = -1; }},
      {"id2label has 2 entries",
       [](BertConfig& c) {
         c.id2label = {"a", "b"};
       }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    BertConfig c = Tiny();
    k.mutate(c);
    ExpectError(ValidateBertConfig(c, kSource), k.what);
  }
  // hidden_act error names the value.
  BertConfig c = Tiny();
  c.hidden_act = "relu";
  EXPECT_THAT(std::string(ValidateBertConfig(c, kSource).message()), HasSubstr("'relu'"));
}

TEST(BertConfigToJson, RoundTripsThroughParse) {
  BertConfig c = Tiny();
  c.type_vocab_size = 1;
  c.pad_token_id = 7;
  c.hidden_dropout_prob = 0.2f;
  c.attention_probs_dropout_prob = 0.0f;
  c.layer_norm_eps = 1e-7f;
  c.initializer_range = 0.03f;
  c.id2label = {"neg", "neu", "pos"};
  absl::StatusOr<BertConfig> back = ParseBertConfigJson(BertConfigToJson(c), kSource);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->vocab_size, c.vocab_size);
  EXPECT_EQ(back->hidden_size, c.hidden_size);
  EXPECT_EQ(back->num_hidden_layers, c.num_hidden_layers);
  EXPECT_EQ(back->num_attention_heads, c.num_attention_heads);
  EXPECT_EQ(back->intermediate_size, c.intermediate_size);
  EXPECT_EQ(back->max_position_embeddings, c.max_position_embeddings);
  EXPECT_EQ(back->type_vocab_size, c.type_vocab_size);
  EXPECT_EQ(back->num_labels, c.num_labels);
  EXPECT_EQ(back->pad_token_id, c.pad_token_id);
  // Floats survive exactly: the shortest decimal form reads back to the same float.
  EXPECT_EQ(back->hidden_dropout_prob, c.hidden_dropout_prob);
  EXPECT_EQ(back->attention_probs_dropout_prob, c.attention_probs_dropout_prob);
  EXPECT_EQ(back->layer_norm_eps, c.layer_norm_eps);
  EXPECT_EQ(back->initializer_range, c.initializer_range);
  EXPECT_EQ(back->hidden_act, c.hidden_act);
  EXPECT_EQ(back->id2label, c.id2label);
}

TEST(BertConfigToJson, HasTheFieldsTransformersExpects) {
  BertConfig c = Tiny();
  const std::string text = BertConfigToJson(c);
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["architectures"], nlohmann::json({"BertForSequenceClassification"}));
  EXPECT_EQ(j["model_type"], "bert");
  EXPECT_EQ(j["position_embedding_type"], "absolute");
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["problem_type"], "single_label_classification");
  EXPECT_TRUE(j["classifier_dropout"].is_null());
  EXPECT_EQ(j["use_cache"], true);
  EXPECT_EQ(j["num_labels"], 3);
  EXPECT_EQ(j["id2label"], nlohmann::json({{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}));
  EXPECT_EQ(j["label2id"], nlohmann::json({{"LABEL_0", 0}, {"LABEL_1", 1}, {"LABEL_2", 2}}));
  // Human-readable floats, not float-to-double noise, and pretty-printed.
  EXPECT_THAT(text, HasSubstr("\"hidden_dropout_prob\": 0.1,"));
  EXPECT_THAT(text, HasSubstr("\"layer_norm_eps\": 1e-12,"));
  EXPECT_THAT(text, HasSubstr("\n  \"vocab_size\": 100"));

  c.num_labels = 1;
  EXPECT_EQ(nlohmann::json::parse(BertConfigToJson(c))["problem_type"], "regression");
}

}  // namespace
}  // namespace ringmaster::trainer
