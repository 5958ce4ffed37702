#include "trainer/io/hf_model_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "trainer/io/hf_tokenizer_files.h"
#include "trainer/io/safetensors.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

BertConfig TinyConfig() {
  BertConfig c;
  c.vocab_size = 100;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 64;
  c.max_position_embeddings = 64;
  c.num_labels = 3;
  c.id2label = {"neg", "neu", "pos"};
  return c;
}

// Every value distinct and non-trivial, so a tensor loaded into the wrong slot shows.
std::vector<float> RandomParams(const ParamLayout& layout, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> p(layout.total);
  for (float& x : p) x = dist(rng);
  return p;
}

// Keeps only the part of `layout` whose names start with `prefix` from `params`.
std::vector<float> Slice(const ParamLayout& layout, const std::vector<float>& params,
                         const std::string& name) {
  const ParamSpec* s = layout.Find(name);
  EXPECT_NE(s, nullptr) << name;
  if (s == nullptr) return {};
  return std::vector<float>(params.begin() + s->offset, params.begin() + s->offset + s->numel);
}

class HfModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("hf_model_dir_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    vocab_path_ = (root_ / "vocab_src.txt").string();
    std::ofstream v(vocab_path_);
    for (const char* t :
         {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "the", "##s", "cat"}) {
      v << t << "\n";
    }
    for (int i = 10; i < 100; ++i) v << "tok" << i << "\n";
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Dir(const std::string& name) const { return (root_ / name).string(); }

  // Exports TinyConfig with RandomParams(seed) to root_/name.
  std::string Export(const std::string& name, uint32_t seed = 1, bool lower = true) {
    config_ = TinyConfig();
    layout_ = MakeBertParamLayout(config_);
    params_ = RandomParams(layout_, seed);
    const std::string dir = Dir(name);
    absl::Status s = ExportHfModelDir(dir, config_, layout_, params_.data(), vocab_path_, lower);
    EXPECT_TRUE(s.ok()) << s;
    return dir;
  }

  // Rewrites DIR/config.json with `edit` applied.
  void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(*ReadFile(dir + "/config.json"));
    edit(j);
    ASSERT_TRUE(WriteFileAtomic(dir + "/config.json", j.dump()).ok());
  }

  // Rewrites DIR/model.safetensors from params_: `rename` maps each layout name to the name to
  // write (nullopt drops it); `extra` tensors are appended; BF16 when `bf16`.
  void WriteModel(const std::string& dir,
                  const std::function<std::optional<std::string>(const std::string&)>& rename,
                  bool bf16 = false) {
    std::vector<TensorToWrite> out;
    std::vector<std::vector<uint16_t>> halves;
    halves.reserve(layout_.specs.size());
    for (const ParamSpec& s : layout_.specs) {
      std::optional<std::string> name = rename(s.name);
      if (!name) continue;
      if (bf16) {
        std::vector<uint16_t> h(s.numel);
        for (size_t i = 0; i < s.numel; ++i) {
          h[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(params_[s.offset + i]) >> 16);
        }
        halves.push_back(std::move(h));
        out.push_back({*name, DType::kBF16, s.shape, halves.back().data(), s.numel * 2});
      } else {
        out.push_back({*name, DType::kF32, s.shape, params_.data() + s.offset, s.numel * 4});
      }
    }
    // What real checkpoints carry besides the model: an int64 buffer and a pretraining head.
    static const int64_t kPositionIds[3] = {0, 1, 2};
    static const float kClsBias[2] = {0.5f, 0.25f};
    out.push_back({"bert.embeddings.position_ids", DType::kI64, {1, 3}, kPositionIds, 24});
    out.push_back({"cls.predictions.bias", DType::kF32, {2}, kClsBias, 8});
    absl::Status s = WriteSafetensors(dir + "/model.safetensors", out, {{"format", "pt"}});
    ASSERT_TRUE(s.ok()) << s;
  }

  void ExpectParamsEqual(const HfModel& m, const std::vector<float>& want,
                         const std::string& skip_prefix_a = "~",
                         const std::string& skip_prefix_b = "~") {
    ASSERT_EQ(m.layout.total, layout_.total);
    for (const ParamSpec& s : m.layout.specs) {
      if (s.name.rfind(skip_prefix_a, 0) == 0 || s.name.rfind(skip_prefix_b, 0) == 0) continue;
      EXPECT_EQ(Slice(m.layout, m.params, s.name), Slice(layout_, want, s.name)) << s.name;
    }
  }

  fs::path root_;
  std::string vocab_path_;
  BertConfig config_;
  ParamLayout layout_;
  std::vector<float> params_;
};

TEST_F(HfModelDirTest, RoundTrip) {
  const std::string dir = Export("model");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json", "tokenizer.json"}) {
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + f)) << f;
  }
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->classifier_initialized_fresh);
  EXPECT_FALSE(m->pooler_initialized_fresh);
  EXPECT_EQ(m->config.num_labels, 3);
  EXPECT_EQ(m->config.id2label, config_.id2label);
  EXPECT_EQ(m->config.hidden_size, 32);
  EXPECT_EQ(m->config.num_hidden_layers, 2);
  EXPECT_EQ(m->config.intermediate_size, 64);
  EXPECT_EQ(m->config.max_position_embeddings, 64);
  EXPECT_EQ(m->params, params_);  // bitwise: F32 all the way

  // The file holds HF names and shapes in layout order.
  auto reader = SafetensorsReader::Open(dir + "/model.safetensors");
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->tensors().size(), layout_.specs.size());
  for (size_t i = 0; i < layout_.specs.size(); ++i) {
    EXPECT_EQ((*reader)->tensors()[i].name, layout_.specs[i].name);
    EXPECT_EQ((*reader)->tensors()[i].shape, layout_.specs[i].shape);
    EXPECT_EQ((*reader)->tensors()[i].dtype, DType::kF32);
  }
  EXPECT_EQ((*reader)->metadata().at("format"), "pt");

  // Exporting again replaces the directory and leaves no temporary or old copies beside it.
  const std::vector<float> first = params_;
  params_ = RandomParams(layout_, 2);
  ASSERT_NE(params_, first);
  ASSERT_TRUE(
      ExportHfModelDir(dir + "/", config_, layout_, params_.data(), vocab_path_, true).ok());
  m = LoadHfModelDir(dir, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->params, params_);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root_)) entries.push_back(e.path().filename());
  EXPECT_THAT(entries, ::testing::UnorderedElementsAre("model", "vocab_src.txt"));
}

TEST_F(HfModelDirTest, TokenizerFiles) {
  const std::string dir = Export("cased", 1, /*lower=*/false);
  EXPECT_EQ(*ReadFile(dir + "/vocab.txt"), *ReadFile(vocab_path_));
  const nlohmann::json tc = nlohmann::json::parse(*ReadFile(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tc["do_lower_case"], false);
  EXPECT_EQ(tc["tokenizer_class"], "BertTokenizer");
  EXPECT_EQ(tc["model_max_length"], 64);
  EXPECT_EQ(tc["cls_token"], "[CLS]");
  EXPECT_EQ(tc["sep_token"], "[SEP]");
  EXPECT_EQ(tc["pad_token"], "[PAD]");
  EXPECT_EQ(tc["unk_token"], "[UNK]");
  EXPECT_EQ(tc["mask_token"], "[MASK]");
  const nlohmann::json st = nlohmann::json::parse(*ReadFile(dir + "/special_tokens_map.json"));
  EXPECT_EQ(st, nlohmann::json({{"cls_token", "[CLS]"},
                                {"mask_token", "[MASK]"},
                                {"pad_token", "[PAD]"},
                                {"sep_token", "[SEP]"},
                                {"unk_token", "[UNK]"}}));
  EXPECT_FALSE(ReadDoLowerCase(dir));
  EXPECT_TRUE(ReadDoLowerCase(Export("uncased", 1, /*lower=*/true)));
}

// The export's tokenizer.json lists vocab.txt's tokens by id with the casing, and a directory
// holding only tokenizer.json reads back the same vocabulary; model_max_length is the length
// given to the export.
TEST_F(HfModelDirTest, TokenizerJsonRoundTrip) {
  config_ = TinyConfig();
  layout_ = MakeBertParamLayout(config_);
  params_ = RandomParams(layout_, 1);
  HfTokenizerExport tok;
  tok.vocab_text = *ReadFile(vocab_path_);
  tok.do_lower_case = false;
  tok.model_max_length = 24;
  const std::string dir = Dir("tj");
  ASSERT_TRUE(ExportHfModelDir(dir, config_, layout_, params_.data(), tok).ok());
  const nlohmann::json tj = nlohmann::json::parse(*ReadFile(dir + "/tokenizer.json"));
  EXPECT_EQ(tj["model"]["type"], "WordPiece");
  EXPECT_EQ(tj["model"]["vocab"]["cat"], 9);
  EXPECT_EQ(tj["normalizer"]["lowercase"], false);
  EXPECT_EQ(tj["post_processor"]["special_tokens"]["[SEP]"]["ids"], nlohmann::json({3}));
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(dir + "/tokenizer_config.json"))["model_max_length"],
            24);

  absl::StatusOr<HfTokenizerSource> from_txt = ReadHfTokenizer(dir);
  ASSERT_TRUE(from_txt.ok()) << from_txt.status();
  EXPECT_EQ(from_txt->vocab_path, dir + "/vocab.txt");
  EXPECT_FALSE(from_txt->do_lower_case);
  EXPECT_EQ(from_txt->model_max_length, 24);

  fs::remove(dir + "/vocab.txt");
  absl::StatusOr<HfTokenizerSource> from_json = ReadHfTokenizer(dir);
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_TRUE(from_json->vocab_path.empty());
  EXPECT_EQ(from_json->source, dir + "/tokenizer.json");
  EXPECT_FALSE(from_json->do_lower_case);
  EXPECT_EQ(from_json->model_max_length, 24);
  std::string joined;
  for (const std::string& t : from_json->tokens) joined += t + "\n";
  EXPECT_EQ(joined, *ReadFile(vocab_path_));

  fs::remove(dir + "/tokenizer.json");
  absl::StatusOr<HfTokenizerSource> none = ReadHfTokenizer(dir);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              HasSubstr(dir + ": has neither vocab.txt nor tokenizer.json"));
}

// The tokenizer mode an export records (model.tokenizer_compat) reads back, from vocab.txt's
// directory and tokenizer.json's; a directory that records none is slow; a bad value is an error
// naming the file, the key and the allowed values.
TEST_F(HfModelDirTest, TokenizerCompatRoundTrip) {
  config_ = TinyConfig();
  layout_ = MakeBertParamLayout(config_);
  params_ = RandomParams(layout_, 1);
  HfTokenizerExport tok;
  tok.vocab_text = *ReadFile(vocab_path_);
  tok.compat = jobspec::TokenizerCompat::kFast;
  const std::string dir = Dir("compat");
  ASSERT_TRUE(ExportHfModelDir(dir, config_, layout_, params_.data(), tok).ok());
  nlohmann::json tc = nlohmann::json::parse(*ReadFile(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tc[kTokenizerCompatKey], "fast");
  absl::StatusOr<HfTokenizerSource> src = ReadHfTokenizer(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->compat, jobspec::TokenizerCompat::kFast);

  const std::string slow_dir = Export("slow");
  EXPECT_EQ(
      nlohmann::json::parse(*ReadFile(slow_dir + "/tokenizer_config.json"))[kTokenizerCompatKey],
      "slow");

  fs::remove(dir + "/vocab.txt");  // read from tokenizer.json
  src = ReadHfTokenizer(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->compat, jobspec::TokenizerCompat::kFast);

  tc.erase(kTokenizerCompatKey);  // any other model directory
  ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer_config.json", tc.dump()).ok());
  src = ReadHfTokenizer(dir);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ(src->compat, jobspec::TokenizerCompat::kSlow);

  for (const auto& [bad, shown] : {std::pair{nlohmann::json("rust"), std::string("'rust'")},
                                   std::pair{nlohmann::json(true), std::string("true")}}) {
    tc[kTokenizerCompatKey] = bad;
    ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer_config.json", tc.dump()).ok());
    src = ReadHfTokenizer(dir);
    ASSERT_FALSE(src.ok());
    EXPECT_THAT(std::string(src.status().message()),
                HasSubstr(dir + "/tokenizer_config.json: ringmaster_tokenizer_compat: " + shown +
                          " is not one of: slow, fast"));
  }
}

// A sentence-transformers folder loads through its Transformer module, the same weights as the
// module's folder alone, with a note naming the pooling that is replaced.
TEST_F(HfModelDirTest, SentenceTransformersFolder) {
  const std::string st = Dir("st");
  fs::create_directories(st);
  const std::string inner = Export("st/0_Transformer");
  fs::create_directories(st + "/1_Pooling");
  ASSERT_TRUE(
      WriteFileAtomic(st + "/1_Pooling/config.json",
                      R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true})")
          .ok());
  ASSERT_TRUE(WriteFileAtomic(st + "/modules.json", R"([
    {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])")
                  .ok());
  absl::StatusOr<HfModel> m = LoadHfModelDir(st, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dir, inner);
  EXPECT_EQ(m->params, params_);
  EXPECT_THAT(m->note, HasSubstr(st + " is a sentence-transformers model: its transformer "
                                      "(0_Transformer/) is fine-tuned"));
  EXPECT_THAT(m->note,
              HasSubstr("mean_tokens pooling (1_Pooling) replaced by the classification head"));

  absl::StatusOr<HfModel> plain = LoadHfModelDir(inner, 0, 7);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->note.empty());

  ASSERT_TRUE(
      WriteFileAtomic(st + "/modules.json", R"([{"path": "1_Pooling", "type": "x.Pooling"}])")
          .ok());
  m = LoadHfModelDir(st, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(
      std::string(m.status().message()),
      HasSubstr(st + "/modules.json: no module of type sentence_transformers.models.Transformer"));
}

TEST_F(HfModelDirTest, ReadDoLowerCaseDefaultsToTrue) {
  EXPECT_TRUE(ReadDoLowerCase(Dir("absent")));
  const std::string dir = Dir("tc");
  fs::create_directories(dir);
  for (const char* text : {"not json", "[false]", R"({"do_lower_case": "false"})", "{}"}) {
    SCOPED_TRACE(text);
    ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer_config.json", text).ok());
    EXPECT_TRUE(ReadDoLowerCase(dir));
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/tokenizer_config.json", R"({"do_lower_case": false})").ok());
  EXPECT_FALSE(ReadDoLowerCase(dir));
}

TEST_F(HfModelDirTest, MissingConfigFieldIsAnError) {
  const std::string dir = Export("model");
  EditConfig(dir, [](nlohmann::json& j) { j.erase("hidden_size"); });
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(dir + "/config.json"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("hidden_size"));
}

TEST_F(HfModelDirTest, ShapeMismatchNamesTensorAndShapes) {
  const std::string dir = Export("model");
  EditConfig(dir, [](nlohmann::json& j) { j["intermediate_size"] = 48; });
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  const std::string msg(m.status().message());
  EXPECT_THAT(msg, HasSubstr(dir + "/model.safetensors"));
  EXPECT_THAT(msg, HasSubstr("'bert.encoder.layer.0.intermediate.dense.weight'"));
  EXPECT_THAT(msg, HasSubstr("shape [64, 32], expected [48, 32]"));
}

TEST_F(HfModelDirTest, AcceptsBertModelNamesAndGammaBeta) {
  const std::string dir = Export("model");
  // A headless BertModel checkpoint in the old TF-converted naming: no "bert." prefix, LayerNorm
  // gamma/beta, no pooler and no classifier.
  WriteModel(dir, [](const std::string& name) -> std::optional<std::string> {
    if (name.rfind("classifier.", 0) == 0 || name.rfind("bert.pooler.", 0) == 0) {
      return std::nullopt;
    }
    std::string out = name.substr(5);  // drop "bert."
    if (out.find("LayerNorm.") != std::string::npos) {
      if (out.ends_with(".weight")) out.replace(out.size() - 6, 6, "gamma");
      if (out.ends_with(".bias")) out.replace(out.size() - 4, 4, "beta");
    }
    return out;
  });
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->classifier_initialized_fresh);
  EXPECT_TRUE(m->pooler_initialized_fresh);
  ExpectParamsEqual(*m, params_, "classifier.", "bert.pooler.");
  // The fresh heads are exactly InitBertParams' for the seed.
  std::vector<float> fresh(layout_.total, 0.0f);
  InitBertParams(config_, layout_, 7, fresh.data());
  for (const char* name : {"classifier.weight", "classifier.bias", "bert.pooler.dense.weight",
                           "bert.pooler.dense.bias"}) {
    EXPECT_EQ(Slice(m->layout, m->params, name), Slice(layout_, fresh, name)) << name;
  }
  // ...and depend on it.
  absl::StatusOr<HfModel> other = LoadHfModelDir(dir, 0, 8);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(Slice(other->layout, other->params, "classifier.weight"),
            Slice(m->layout, m->params, "classifier.weight"));
}

TEST_F(HfModelDirTest, DuplicateMappingIsAnError) {
  const std::string dir = Export("model");
  WriteModel(dir, [](const std::string& name) -> std::optional<std::string> {
    return name == "bert.embeddings.LayerNorm.weight" ? "bert.embeddings.LayerNorm.gamma" : name;
  });
  // Also keep the new-style name: both now feed one parameter.
  {
    auto r = SafetensorsReader::Open(dir + "/model.safetensors");
    ASSERT_TRUE(r.ok());
    std::vector<TensorToWrite> out;
    for (const TensorInfo& t : (*r)->tensors()) {
      out.push_back({t.name, t.dtype, t.shape, (*r)->data(t), t.end - t.begin});
    }
    const ParamSpec* ln = layout_.Find("bert.embeddings.LayerNorm.weight");
    out.push_back({ln->name, DType::kF32, ln->shape, params_.data() + ln->offset, ln->numel * 4});
    ASSERT_TRUE(WriteSafetensors(dir + "/model2.safetensors", out).ok());
    fs::rename(dir + "/model2.safetensors", dir + "/model.safetensors");
  }
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("'bert.embeddings.LayerNorm.gamma' and 'bert.embeddings.LayerNorm.weight' "
                        "both map to parameter 'bert.embeddings.LayerNorm.weight'"));
}

TEST_F(HfModelDirTest, ClassifierForOtherNumLabelsIsReplaced) {
  const std::string dir = Export("model");
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 5, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->classifier_initialized_fresh);
  EXPECT_FALSE(m->pooler_initialized_fresh);
  EXPECT_EQ(m->config.num_labels, 5);
  EXPECT_TRUE(m->config.id2label.empty());
  EXPECT_EQ(m->layout.Find("classifier.weight")->shape, (std::vector<int64_t>{5, 32}));
  EXPECT_EQ(m->params.size(), m->layout.total);
  for (const ParamSpec& s : m->layout.specs) {
    if (s.name.rfind("classifier.", 0) == 0) continue;
    EXPECT_EQ(Slice(m->layout, m->params, s.name), Slice(layout_, params_, s.name)) << s.name;
  }

  // The same number of labels keeps the trained head and its names.
  m = LoadHfModelDir(dir, 3, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->classifier_initialized_fresh);
  EXPECT_EQ(m->config.id2label, config_.id2label);
  EXPECT_EQ(m->params, params_);

  // A config saying 5 labels over a 3-label head: the head is for other labels, so fresh.
  EditConfig(dir, [](nlohmann::json& j) {
    j.erase("id2label");
    j.erase("label2id");
    j["num_labels"] = 5;
  });
  m = LoadHfModelDir(dir, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->classifier_initialized_fresh);
}

TEST_F(HfModelDirTest, HalfAHeadIsAnError) {
  const std::string dir = Export("model");
  WriteModel(dir, [](const std::string& name) -> std::optional<std::string> {
    if (name == "classifier.bias") return std::nullopt;
    return name;
  });
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("has 'classifier.weight' but not 'classifier.bias'"));
}

TEST_F(HfModelDirTest, MissingTensorIsAnError) {
  const std::string dir = Export("model");
  WriteModel(dir, [](const std::string& name) -> std::optional<std::string> {
    if (name == "bert.encoder.layer.1.output.dense.bias") return std::nullopt;
    return name;
  });
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(dir + "/model.safetensors: missing tensor "
                              "'bert.encoder.layer.1.output.dense.bias'"));
}

TEST_F(HfModelDirTest, ConvertsBfloat16) {
  const std::string dir = Export("model");
  WriteModel(
      dir, [](const std::string& name) { return std::optional<std::string>(name); },
      /*bf16=*/true);
  absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->params.size(), params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const float want = std::bit_cast<float>(std::bit_cast<uint32_t>(params_[i]) & 0xffff0000u);
    ASSERT_EQ(m->params[i], want) << i;
  }
}

TEST_F(HfModelDirTest, MissingFiles) {
  const std::string empty = Dir("empty");
  fs::create_directories(empty);
  absl::StatusOr<HfModel> m = LoadHfModelDir(empty, 0, 7);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(empty + "/config.json"));

  const std::string dir = Export("model");
  fs::remove(dir + "/model.safetensors");
  m = LoadHfModelDir(dir, 0, 7);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(dir + "/model.safetensors"));

  std::ofstream(dir + "/pytorch_model.bin") << "pickle";
  m = LoadHfModelDir(dir, 0, 7);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("pytorch_model.bin"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("only a single model.safetensors"));
}

TEST_F(HfModelDirTest, ExportErrorsLeaveNothingBehind) {
  config_ = TinyConfig();
  layout_ = MakeBertParamLayout(config_);
  params_ = RandomParams(layout_, 1);
  const std::string dir = Dir("model");
  absl::Status s =
      ExportHfModelDir(dir, config_, layout_, params_.data(), Dir("no_vocab.txt"), true);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no_vocab.txt"));

  BertConfig other = config_;
  other.num_labels = 4;  // the layout no longer matches the config
  other.id2label.clear();
  s = ExportHfModelDir(dir, other, layout_, params_.data(), vocab_path_, true);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("classifier.weight"));

  other = config_;
  other.hidden_act = "relu";
  s = ExportHfModelDir(dir, other, layout_, params_.data(), vocab_path_, true);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("relu"));

  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(root_)) entries.push_back(e.path().filename());
  EXPECT_THAT(entries, ::testing::ElementsAre("vocab_src.txt"));
}

// transformers is the reference: it must load our export, and we must load what it saves.
TEST_F(HfModelDirTest, PythonOracle) {
  const char* python = std::getenv("RINGMASTER_PYTHON");
  const char* source = std::getenv("RINGMASTER_SOURCE_DIR");
  if (python == nullptr || *python == '\0' || source == nullptr || *source == '\0') {
    GTEST_SKIP() << "RINGMASTER_PYTHON or RINGMASTER_SOURCE_DIR not set";
  }
  const std::string ours = Export("ours");
  const std::string work = Dir("work");
  fs::create_directories(work);
  const BertConfig c = TinyConfig();
  nlohmann::json spec = {{"ours", ours},
                         {"work", work},
                         {"expect",
                          {{"num_labels", 3},
                           {"id2label", c.id2label},
                           {"do_lower_case", true},
                           {"model_max_length", 64},
                           {"text", "Hello the CATs world"},
                           {"input_ids", {2, 5, 7, 9, 8, 6, 3}}}},
                         {"config",
                          {{"vocab_size", c.vocab_size},
                           {"hidden_size", c.hidden_size},
                           {"num_hidden_layers", c.num_hidden_layers},
                           {"num_attention_heads", c.num_attention_heads},
                           {"intermediate_size", c.intermediate_size},
                           {"max_position_embeddings", c.max_position_embeddings},
                           {"num_labels", 4}}}};
  const std::string spec_path = Dir("spec.json");
  ASSERT_TRUE(WriteFileAtomic(spec_path, spec.dump()).ok());
  const std::string script = std::string(source) + "/tests/oracle/hf_load_check.py";
  const std::string log = Dir("python.log");
  const std::string cmd =
      absl::StrCat("'", python, "' '", script, "' '", spec_path, "' >'", log, "' 2>&1");
  const int rc = std::system(cmd.c_str());
  const std::string output = ReadFile(log).value_or("");
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << output;
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << output;

  struct Case {
    const char* name;
    bool classifier_fresh;
    bool pooler_fresh;
  };
  const Case cases[] = {{"hf_cls", false, false},       {"hf_cls_f16", false, false},
                        {"hf_cls_bf16", false, false},  {"hf_base", true, false},
                        {"hf_base_nopool", true, true}, {"hf_pretrain", true, false}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const std::string dir = work + "/" + k.name;
    absl::StatusOr<HfModel> m = LoadHfModelDir(dir, 0, 7);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->classifier_initialized_fresh, k.classifier_fresh);
    EXPECT_EQ(m->pooler_initialized_fresh, k.pooler_fresh);
    // Saved checkpoints record num_labels=4 for the classification models; BertModel's config
    // keeps it as well, so the fresh heads also have 4 rows.
    EXPECT_EQ(m->config.num_labels, 4);
    EXPECT_EQ(m->config.hidden_size, 32);
    auto ref = SafetensorsReader::Open(dir + "_ref.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.status();
    int compared = 0;
    for (const ParamSpec& s : m->layout.specs) {
      const bool fresh = (k.classifier_fresh && s.name.rfind("classifier.", 0) == 0) ||
                         (k.pooler_fresh && s.name.rfind("bert.pooler.", 0) == 0);
      if (fresh) continue;
      const TensorInfo* t = (*ref)->Find(s.name);
      if (t == nullptr) t = (*ref)->Find(s.name.substr(5));  // BertModel: no "bert." prefix
      ASSERT_NE(t, nullptr) << s.name;
      ASSERT_EQ(t->shape, s.shape) << s.name;
      std::vector<float> want(s.numel);
      ASSERT_TRUE((*ref)->ReadFloat(*t, want.data(), want.size()).ok());
      EXPECT_EQ(Slice(m->layout, m->params, s.name), want) << s.name;
      ++compared;
    }
    EXPECT_GT(compared, 30);
  }
}

}  // namespace
}  // namespace ringmaster::trainer
