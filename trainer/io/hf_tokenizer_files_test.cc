#include "trainer/io/hf_tokenizer_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "trainer/text/unicode_util.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A RoBERTa-style directory: vocab.json (specials, the 256 byte symbols, "Ġh" and "Ġhi") and
// merges.txt.
class ByteBpeDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/hf_bpe_dir_" + std::to_string(::getpid());
    fs::create_directories(dir_);
    nlohmann::json vocab = nlohmann::json::object();
    int id = 0;
    for (const char* s : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}) vocab[s] = id++;
    for (int b = 0; b < 256; ++b) {
      std::string sym;
      AppendUtf8(ByteBpeTokenizer::ByteSymbol(static_cast<uint8_t>(b)), &sym);
      vocab[sym] = id++;
    }
    vocab["Ġh"] = id++;
    vocab["Ġhi"] = id++;
    vocab_ = vocab;
    std::ofstream(dir_ + "/vocab.json") << vocab.dump();
    std::ofstream(dir_ + "/merges.txt") << "#version: 0.2\nĠ h\nĠh i\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
  nlohmann::json vocab_;
};

TEST_F(ByteBpeDirTest, ReadsVocabJsonAndMergesWithTheConfigsPrefixSpace) {
  auto t = ReadHfByteBpeTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->tokenizer.Tokenize("hi hi"), ElementsAre("h", "i", "Ġhi"));
  EXPECT_EQ(t->model_max_length, 0);
  std::ofstream(dir_ + "/tokenizer_config.json")
      << R"({"add_prefix_space": true, "model_max_length": 514})";
  t = ReadHfByteBpeTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->tokenizer.Tokenize("hi hi"), ElementsAre("Ġhi", "Ġhi"));
  EXPECT_EQ(t->model_max_length, 514);
  EXPECT_EQ(t->tokenizer.options().compat, jobspec::TokenizerCompat::kSlow);
  t = ReadHfByteBpeTokenizer(dir_, jobspec::TokenizerCompat::kFast);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tokenizer.options().compat, jobspec::TokenizerCompat::kFast);
}

TEST_F(ByteBpeDirTest, ReadsTokenizerJsonsBpeModel) {
  fs::remove(dir_ + "/vocab.json");
  fs::remove(dir_ + "/merges.txt");
  std::ofstream(dir_ + "/tokenizer.json")
      << nlohmann::json{{"model",
                         {{"type", "BPE"}, {"vocab", vocab_}, {"merges", {"Ġ h", "Ġh i"}}}}}
             .dump();
  auto t = ReadHfByteBpeTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->tokenizer.Tokenize(" hi"), ElementsAre("Ġhi"));
  EXPECT_EQ(t->source, dir_ + "/tokenizer.json");
}

TEST_F(ByteBpeDirTest, MissingMergesIsNamed) {
  fs::remove(dir_ + "/merges.txt");
  auto t = ReadHfByteBpeTokenizer(dir_);
  EXPECT_THAT(t.status().message(), HasSubstr(dir_ + "/merges.txt"));
}

TEST_F(ByteBpeDirTest, WordPieceReaderRecognisesTheLayoutAndSaysWhy) {
  EXPECT_TRUE(HasHfByteBpeFiles(dir_));
  auto src = ReadHfTokenizer(dir_);
  ASSERT_FALSE(src.ok());
  EXPECT_THAT(src.status().message(),
              HasSubstr("has vocab.json + merges.txt: a byte-level BPE tokenizer (RoBERTa's"));
  std::ofstream(dir_ + "/vocab.txt") << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhi\n";
  EXPECT_FALSE(HasHfByteBpeFiles(dir_));
  EXPECT_TRUE(ReadHfTokenizer(dir_).ok());  // vocab.txt first, as before
}

}  // namespace
}  // namespace ringmaster::trainer
