#include "trainer/data/tsv_row_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer/data/batcher.h"
#include "trainer/data/sentiment_gen.h"
#include "trainer/data/tsv.h"
#include "trainer/text/wordpiece.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

std::string TmpDir() {
  std::string dir = absl::StrCat(::testing::TempDir(), "/tsv_row_index_test_", ::getpid());
  EXPECT_TRUE(MakeDirs(dir).ok());
  return dir;
}

std::string WriteTmp(const std::string& name, const std::string& content) {
  std::string path = absl::StrCat(TmpDir(), "/", name);
  EXPECT_TRUE(WriteFileAtomic(path, content).ok());
  return path;
}

// The index must agree with ReadTsv on every file: same rows, or the very same error.
void ExpectSameAsReadTsv(const std::string& path, int num_labels) {
  SCOPED_TRACE(path);
  absl::StatusOr<std::vector<Example>> want = ReadTsv(path, num_labels);
  absl::StatusOr<TsvRowIndex> got = TsvRowIndex::Build(path, num_labels);
  ASSERT_EQ(got.status(), want.status());
  if (!want.ok()) return;
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    absl::StatusOr<std::string> text = got->ReadText(static_cast<int64_t>(i));
    ASSERT_TRUE(text.ok()) << text.status();
    ASSERT_EQ(*text, (*want)[i].sentence) << "row " << i;
    ASSERT_EQ(got->label(static_cast<int64_t>(i)), (*want)[i].label) << "row " << i;
    ASSERT_EQ(got->text_bytes()[i], (*want)[i].sentence.size()) << "row " << i;
  }
}

TEST(TsvRowIndex, ReadsRowsAsReadTsvDoes) {
  ExpectSameAsReadTsv(WriteTmp("ok.tsv", "sentence\tlabel\nit was great \t1\nawful .\t0\n"), 2);
  ExpectSameAsReadTsv(
      WriteTmp("cols.tsv", "idx\tlabel\tsentence\textra\n0\t2\tfirst\tx\n1\t0\t\"q\" here\ty\n"),
      3);
  ExpectSameAsReadTsv(WriteTmp("crlf.tsv", "\xEF\xBB\xBFsentence\tlabel\r\na\t1\r\nb\t0"), 2);
  ExpectSameAsReadTsv(WriteTmp("trail.tsv", "sentence\tlabel\na\t1\n\n\n"), 2);
  ExpectSameAsReadTsv(WriteTmp("reg.tsv", "sentence\tlabel\na\t0.25\nb\t-3e2\n"), 1);
  ExpectSameAsReadTsv(WriteTmp("empty_text.tsv", "sentence\tlabel\n\t1\nb\t0\n"), 2);
  ExpectSameAsReadTsv(WriteTmp("utf8.tsv", "sentence\tlabel\ncaf\xC3\xA9 \xE2\x9C\x93\t1\n"), 2);
}

TableOptions Columns(DataFormat format, std::string text, std::string label) {
  TableOptions o;
  o.format = format;
  o.text_column = std::move(text);
  o.label_column = std::move(label);
  return o;
}

// The same for CSV and JSON Lines: ReadText decodes each record again.
void ExpectSameAsReadTable(const std::string& path, const TableOptions& options, int num_labels) {
  SCOPED_TRACE(path);
  absl::StatusOr<std::vector<Example>> want = ReadTable(path, options, num_labels);
  absl::StatusOr<TsvRowIndex> got = TsvRowIndex::Build(path, num_labels, options);
  ASSERT_EQ(got.status(), want.status());
  if (!want.ok()) return;
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    absl::StatusOr<std::string> text = got->ReadText(static_cast<int64_t>(i));
    ASSERT_TRUE(text.ok()) << text.status();
    ASSERT_EQ(*text, (*want)[i].sentence) << "row " << i;
    ASSERT_EQ(got->label(static_cast<int64_t>(i)), (*want)[i].label) << "row " << i;
    ASSERT_EQ(got->words()[i], CountWords((*want)[i].sentence)) << "row " << i;
  }
}

TEST(TsvRowIndex, ReadsCsvAndJsonLinesAsReadTableDoes) {
  const TableOptions csv = Columns(DataFormat::kAuto, "review", "stars");
  ExpectSameAsReadTable(WriteTmp("ok.csv",
                                 "\xEF\xBB\xBFid,review,stars\r\n1,\"great, really\",1\r\n"
                                 "2,\"said \"\"meh\"\"\r\n\r\nthen left\",0\r\n3,plain,1"),
                        csv, 2);
  ExpectSameAsReadTable(WriteTmp("bad.csv", "id,review,stars\n1,\"open,1\n"), csv, 2);
  const TableOptions jsonl = Columns(DataFormat::kAuto, "text", "y");
  ExpectSameAsReadTable(WriteTmp("ok.jsonl",
                                 "\xEF\xBB\xBF{\"text\": \"a \\u00e9\", \"y\": 1}\r\n"
                                 "{\"y\": 0, \"text\": \"b\\nc\"}\n"),
                        jsonl, 2);
  ExpectSameAsReadTable(WriteTmp("bad.jsonl", "{\"text\": \"a\", \"y\": 3}\n"), jsonl, 2);
}

TEST(TsvRowIndex, ReadsSentencePairs) {
  TableOptions o;
  o.text_column = "q";
  o.text_pair_column = "p";
  for (const auto& [name, body] : std::vector<std::pair<std::string, std::string>>{
           {"pairs.tsv", "q\tp\tlabel\nwho is it\tit is me\t1\nx\t\t0\n"},
           {"pairs.csv", "q,p,label\nwho is it,\"it is\nme\",1\nx,,0\n"},
           {"pairs.jsonl",
            "{\"q\": \"who is it\", \"p\": \"it is me\", \"label\": 1}\n"
            "{\"q\": \"x\", \"p\": \"\", \"label\": 0}\n"}}) {
    SCOPED_TRACE(name);
    const std::string path = WriteTmp(name, body);
    absl::StatusOr<TsvRowIndex> index = TsvRowIndex::Build(path, 2, o);
    ASSERT_TRUE(index.ok()) << index.status();
    absl::StatusOr<std::vector<Example>> want = ReadTable(path, o, 2);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(index->has_pairs());
    ASSERT_EQ(index->size(), 2u);
    for (int64_t i = 0; i < 2; ++i) {
      absl::StatusOr<RowText> row = index->ReadRow(i);
      ASSERT_TRUE(row.ok()) << row.status();
      EXPECT_EQ(row->text, (*want)[i].sentence);
      EXPECT_EQ(row->text_pair, (*want)[i].text_pair);
    }
    EXPECT_EQ(index->words()[0], 6u);  // both texts
    // [CLS] a [SEP] b [SEP]: three specials.
    EXPECT_THAT(index->LengthKeys(100), ::testing::ElementsAre(9, 4));
    EXPECT_THAT(index->LengthKeys(5), ::testing::ElementsAre(5, 4));
  }
}

TEST(TsvRowIndex, InfersLabelNamesAsReadTableDoes) {
  const std::string path = WriteTmp(
      "named.jsonl",
      "{\"sentence\": \"a\", \"label\": \"pos\"}\n{\"sentence\": \"b\", \"label\": \"neg\"}\n");
  ExpectSameAsReadTable(path, TableOptions{}, 2);
  absl::StatusOr<TsvRowIndex> index = TsvRowIndex::Build(path, 2);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_THAT(index->label_names(), ::testing::ElementsAre("neg", "pos"));
  EXPECT_EQ(index->label(0), 1.0f);
  EXPECT_EQ(index->label(1), 0.0f);
  absl::StatusOr<TsvRowIndex> ids =
      TsvRowIndex::Build(WriteTmp("ids.tsv", "sentence\tlabel\na\t1\n"), 2);
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->label_names().empty());
}

TEST(TsvRowIndex, RefusesWhatReadTsvRefusesWithTheSameError) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"nolabel.tsv", "sentence\nx\n"},
      {"nosentence.tsv", "label\n1\n"},
      {"dup.tsv", "sentence\tlabel\tsentence\nx\t1\ty\n"},
      {"notint.tsv", "sentence\tlabel\nx\t1\ny\tone\n"},
      {"frac.tsv", "sentence\tlabel\nx\t1.5\n"},
      {"range.tsv", "sentence\tlabel\nx\t1\ny\t0\nz\t2\n"},
      {"neg.tsv", "sentence\tlabel\nx\t-1\n"},
      {"utf8.tsv", "sentence\tlabel\nok\t1\nb\xFF\x64\t0\n"},
      {"overlong.tsv", "sentence\tlabel\nok\t1\n\xC0\xAF\t0\n"},
      {"surrogate.tsv", "sentence\tlabel\nok\t1\n\xED\xA0\x80\t0\n"},
      {"cols.tsv", "sentence\tlabel\nok\t1\nmissing\n"},
      {"cols2.tsv", "sentence\tlabel\nok\t1\textra\n"},
      {"empty.tsv", ""},
      {"blank.tsv", "\n\n"},
      {"bom_only.tsv", "\xEF\xBB\xBF"},
      {"header_only.tsv", "sentence\tlabel\n"},
      {"mid_blank.tsv", "sentence\tlabel\na\t1\n\nb\t0\n"},
      {"blank_first.tsv", "\nsentence\tlabel\na\t1\n"},
  };
  for (const auto& [name, content] : bad) {
    const std::string p = WriteTmp(name, content);
    ExpectSameAsReadTsv(p, 2);
    EXPECT_FALSE(TsvRowIndex::Build(p, 2).ok()) << name;
  }
  // Regression labels must be finite numbers.
  ExpectSameAsReadTsv(WriteTmp("reg_bad.tsv", "sentence\tlabel\na\t0.5\nb\tnan\n"), 1);
  ExpectSameAsReadTsv(WriteTmp("reg_inf.tsv", "sentence\tlabel\na\tinf\n"), 1);
  // A bad num_labels.
  auto zero = TsvRowIndex::Build(WriteTmp("zero.tsv", "sentence\tlabel\na\t0\n"), 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("num_labels must be"));
}

TEST(TsvRowIndex, ErrorsNameFileAndLine) {
  const std::string p = WriteTmp("range_line.tsv", "sentence\tlabel\na\t1\nb\t0\nc\t5\n");
  auto r = TsvRowIndex::Build(p, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(absl::StrCat(p, ":4: ")));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("out of range [0, 2)"));
}

TEST(TsvRowIndex, RefusesFilesOver4GiBMissingFilesAndDirectories) {
  std::string p = WriteTmp("huge.tsv", "sentence\tlabel\n");
  ASSERT_EQ(::truncate(p.c_str(), (int64_t{1} << 32) + 1), 0);  // sparse: costs no disk
  auto r = TsvRowIndex::Build(p, 2);
  auto want = ReadTsv(p, 2);
  ::unlink(p.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), want.status());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("over the limit"));

  auto missing = TsvRowIndex::Build("/nonexistent/dir/x.tsv", 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status(), ReadTsv("/nonexistent/dir/x.tsv", 2).status());
  EXPECT_EQ(TsvRowIndex::Build(TmpDir(), 2).status(), ReadTsv(TmpDir(), 2).status());
}

// Lines that straddle the 1 MiB read chunks, and one line longer than a chunk.
TEST(TsvRowIndex, LinesAcrossReadChunks) {
  std::mt19937_64 rng(5);
  std::string content = "sentence\tlabel\r\n";
  for (int i = 0; i < 30000; ++i) {
    std::string s(1 + rng() % 150, 'a' + static_cast<char>(i % 26));
    absl::StrAppend(&content, s, " ", i, "\t", i % 2, i % 7 == 0 ? "\r\n" : "\n");
  }
  absl::StrAppend(&content, std::string(3 << 20, 'z'), "\t1\n", "last\t0");
  ASSERT_GT(content.size(), size_t{5} << 20);
  ExpectSameAsReadTsv(WriteTmp("big.tsv", content), 2);
  // An error far into the file keeps its line number.
  std::string bad = content.substr(0, content.size() - 1) + "7";
  ExpectSameAsReadTsv(WriteTmp("big_bad.tsv", bad), 2);
}

TEST(TsvRowIndex, FileShortenedAfterIndexingIsAnError) {
  const std::string p = WriteTmp("shrink.tsv", "sentence\tlabel\nfirst\t1\nsecond row\t0\n");
  auto index = TsvRowIndex::Build(p, 2);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(::truncate(p.c_str(), 20), 0);
  auto text = index->ReadText(1);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr(p));
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("shorter than when it was indexed"));
  EXPECT_FALSE(index->ReadText(2).ok());  // out of range
}

// A generated data set and its tokenizer, shared by the tests below.
struct Corpus {
  std::string train;
  std::unique_ptr<WordPieceTokenizer> tok;
};

const Corpus& GetCorpus() {
  static const Corpus* corpus = [] {
    auto* c = new Corpus;
    const std::string dir = absl::StrCat(TmpDir(), "/corpus");
    EXPECT_TRUE(WriteSentimentDataset(dir, 7, 3000, 10).ok());
    c->train = dir + "/train.tsv";
    auto tok = WordPieceTokenizer::FromVocabFile(dir + "/vocab.txt", true);
    EXPECT_TRUE(tok.ok()) << tok.status();
    c->tok = std::make_unique<WordPieceTokenizer>(std::move(*tok));
    return c;
  }();
  return *corpus;
}

// Each rank of a world of N takes the slice [n·r/N, n·(r+1)/N) of every global batch, as the
// trainer does, cut into micro-batches. Its batches must equal the old whole-file path's (all
// rows encoded up front, then MakeBatch), and it must tokenise only the rows of its slices.
TEST(MakeIndexedBatch, EachRankEncodesOnlyItsShareAndBatchesMatchTheWholeFilePath) {
  const Corpus& c = GetCorpus();
  constexpr int kMaxLen = 40;
  auto rows = ReadTsv(c.train, 2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::vector<EncodedExample> all =
      EncodeAll(*rows, [&](std::string_view s) { return c.tok->Encode(s, kMaxLen); });
  auto index = TsvRowIndex::Build(c.train, 2);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->size(), all.size());

  constexpr int kGlobal = 48, kMicro = 5;
  const auto plan = PlanEpoch(index->LengthKeys(kMaxLen), kGlobal, /*shuffle=*/true, 11, 1);
  for (size_t world : {1u, 2u, 3u, 4u}) {
    std::vector<int> encoded_by(index->size(), 0);  // how often each row was tokenised
    size_t total_encoded = 0;
    for (size_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(absl::StrCat("world ", world, " rank ", rank));
      std::vector<std::vector<int64_t>> mine;
      size_t share_rows = 0;
      for (const auto& global : plan) {
        const size_t n = global.size(), b = n * rank / world, e = n * (rank + 1) / world;
        for (size_t i = b; i < e; i += kMicro) {
          mine.emplace_back(global.begin() + i, global.begin() + std::min(e, i + kMicro));
        }
        share_rows += e - b;
      }
      std::atomic<size_t> calls{0};
      std::mutex mu;
      std::set<std::string> texts;
      const std::function<std::vector<int32_t>(std::string_view)> encode = [&](std::string_view s) {
        ++calls;
        std::lock_guard<std::mutex> lock(mu);
        texts.emplace(s);
        return c.tok->Encode(s, kMaxLen);
      };
      BatchPrefetcher pf(mine.size(), [&](size_t i) {
        return MakeIndexedBatch(*index, mine[i], encode, /*pad_id=*/0);
      });
      size_t k = 0;
      while (std::optional<Batch> batch = pf.Next()) {
        ASSERT_LT(k, mine.size());
        EXPECT_EQ(*batch, MakeBatch(all, mine[k], 0));
        for (int64_t row : mine[k]) ++encoded_by[row];
        ++k;
      }
      ASSERT_TRUE(pf.status().ok()) << pf.status();
      EXPECT_EQ(k, mine.size());
      EXPECT_EQ(calls.load(), share_rows);  // its rows, each once, and nothing else
      for (const auto& mb : mine) {
        for (int64_t row : mb) EXPECT_EQ(texts.count((*rows)[row].sentence), 1u);
      }
      if (world > 1) {
        EXPECT_LT(share_rows, index->size() / world + plan.size());
      }
      total_encoded += calls.load();
    }
    EXPECT_EQ(total_encoded, index->size());
    EXPECT_TRUE(std::all_of(encoded_by.begin(), encoded_by.end(), [](int n) { return n == 1; }))
        << "every row is encoded by exactly one rank";
  }
}

// The bucketing key is the word count, which every rank computes without the vocabulary. On
// the generated corpus every word is one WordPiece, so the keys are the encoded lengths and the
// plan is the one sorting by tokens would give; and bucketing by it keeps the padding of
// sorting by tokens, which byte length (tried first) did not: 13x the padding here.
TEST(PlanEpochWordKeys, KeysAreTheEncodedLengthsWhenWordsAreWordPieces) {
  const Corpus& c = GetCorpus();
  constexpr int kMaxLen = 24;  // some rows are truncated
  auto rows = ReadTsv(c.train, 2);
  ASSERT_TRUE(rows.ok());
  const auto all = EncodeAll(*rows, [&](std::string_view s) { return c.tok->Encode(s, kMaxLen); });
  auto index = TsvRowIndex::Build(c.train, 2);
  ASSERT_TRUE(index.ok());
  const std::vector<uint32_t> keys = index->LengthKeys(kMaxLen);
  const std::vector<uint32_t> tokens = TokenLengths(all);
  ASSERT_EQ(keys, tokens);
  EXPECT_TRUE(std::any_of(tokens.begin(), tokens.end(), [](uint32_t n) { return n == kMaxLen; }));
  constexpr int kBatch = 16;
  EXPECT_EQ(PlanEpoch(keys, kBatch, true, 3, 0), PlanEpoch(tokens, kBatch, true, 3, 0));

  const int64_t by_words = PaddingTokens(all, PlanEpoch(keys, kBatch, true, 3, 0));
  const int64_t by_bytes = PaddingTokens(all, PlanEpoch(index->text_bytes(), kBatch, true, 3, 0));
  std::printf("padding tokens: by words %lld, by bytes %lld\n", static_cast<long long>(by_words),
              static_cast<long long>(by_bytes));
  EXPECT_LT(by_words * 4, by_bytes);
}

TEST(CountWords, SplitsAsBertsBasicTokenizer) {
  EXPECT_EQ(CountWords(""), 0u);
  EXPECT_EQ(CountWords("   \t "), 0u);
  EXPECT_EQ(CountWords("a gripping , funny film"), 5u);
  EXPECT_EQ(CountWords("Hello,world!"), 4u);               // punctuation is a word of its own
  EXPECT_EQ(CountWords("don't stop"), 4u);                 // don ' t stop
  EXPECT_EQ(CountWords("caf\xc3\xa9  na\xc3\xafve"), 2u);  // accented letters inside words
  EXPECT_EQ(CountWords("\xe6\x88\x91\xe7\x88\xb1"
                       "ab"),
            3u);  // two CJK ideographs, then "ab"
  EXPECT_EQ(CountWords("a\xc2\xa0"
                       "b"),
            2u);                          // no-break space separates
  EXPECT_EQ(CountWords("\xff\xfe"), 1u);  // malformed bytes: one word, no crash
}

}  // namespace
}  // namespace ringmaster::trainer
