#include "trainer/data/tsv.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

using ::testing::HasSubstr;

std::string WriteTmp(const std::string& name, const std::string& content) {
  std::string dir = absl::StrCat(::testing::TempDir(), "/tsv_test_", ::getpid());
  EXPECT_TRUE(MakeDirs(dir).ok());
  std::string path = absl::StrCat(dir, "/", name);
  EXPECT_TRUE(WriteFileAtomic(path, content).ok());
  return path;
}

// Asserts that reading fails with a message carrying "<path>:<line>:" and `phrase`.
void ExpectError(const absl::StatusOr<std::vector<Example>>& r, const std::string& path, int line,
                 const std::string& phrase) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning: " << phrase;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(absl::StrCat(path, ":", line, ": ")));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(phrase));
}

TEST(ReadTsv, ReadsSst2Layout) {
  std::string p = WriteTmp("ok.tsv", "sentence\tlabel\nit was great \t1\nawful .\t0\n");
  auto r = ReadTsv(p, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].sentence, "it was great ");  // fields are kept verbatim
  EXPECT_EQ((*r)[0].label, 1.0f);
  EXPECT_EQ((*r)[1].sentence, "awful .");
  EXPECT_EQ((*r)[1].label, 0.0f);
}

TEST(ReadTsv, FindsColumnsByNameAndIgnoresOthers) {
  std::string p = WriteTmp(
      "cols.tsv", "idx\tlabel\tsource\tsentence\n7\t2\tweb\tfine\n8\t0\tnews\t\"quoted\"\n");
  auto r = ReadTsv(p, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].sentence, "fine");
  EXPECT_EQ((*r)[0].label, 2.0f);
  EXPECT_EQ((*r)[1].sentence, "\"quoted\"");  // no quote processing, as in GLUE files
}

TEST(ReadTsv, HandlesCrlfBomAndMissingFinalNewline) {
  std::string p = WriteTmp("crlf.tsv", "\xEF\xBB\xBFsentence\tlabel\r\nA caf\xC3\xA9\t1\r\nb\t0");
  auto r = ReadTsv(p, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].sentence, "A caf\xC3\xA9");
  EXPECT_EQ((*r)[1].sentence, "b");
  EXPECT_EQ((*r)[1].label, 0.0f);
}

TEST(ReadTsv, TrailingBlankLinesAreFine) {
  std::string p = WriteTmp("trail.tsv", "sentence\tlabel\nx\t1\n\n\r\n");
  auto r = ReadTsv(p, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 1u);
}

TEST(ReadTsv, RegressionLabelsAreReals) {
  std::string p = WriteTmp("reg.tsv", "sentence\tlabel\na\t3.25\nb\t-1e-1\n");
  auto r = ReadTsv(p, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_FLOAT_EQ((*r)[0].label, 3.25f);
  EXPECT_FLOAT_EQ((*r)[1].label, -0.1f);
  std::string bad = WriteTmp("reg_bad.tsv", "sentence\tlabel\na\t1\nb\tnan\n");
  ExpectError(ReadTsv(bad, 1), bad, 3, "not a finite number");
}

TEST(ReadTsvErrors, MissingColumns) {
  std::string p = WriteTmp("nolabel.tsv", "sentence\tscore\na\t1\n");
  ExpectError(ReadTsv(p, 2), p, 1, "missing column \"label\"");
  std::string q = WriteTmp("nosent.tsv", "text\tlabel\na\t1\n");
  ExpectError(ReadTsv(q, 2), q, 1, "missing column \"sentence\"");
  std::string d = WriteTmp("dup.tsv", "sentence\tlabel\tlabel\na\t1\t1\n");
  ExpectError(ReadTsv(d, 2), d, 1, "duplicate column");
}

TEST(ReadTsvErrors, NonIntegerLabel) {
  std::string p = WriteTmp("nonint.tsv", "sentence\tlabel\na\t1\nb\t1.5\n");
  ExpectError(ReadTsv(p, 2), p, 3, "not an integer");
  std::string q = WriteTmp("word.tsv", "sentence\tlabel\na\tpositive\n");
  ExpectError(ReadTsv(q, 2), q, 2, "not an integer");
}

TEST(ReadTsvErrors, LabelOutOfRange) {
  std::string p = WriteTmp("range.tsv", "sentence\tlabel\na\t1\nb\t0\nc\t2\n");
  ExpectError(ReadTsv(p, 2), p, 4, "out of range [0, 2)");
  std::string q = WriteTmp("neg.tsv", "sentence\tlabel\na\t-1\n");
  ExpectError(ReadTsv(q, 3), q, 2, "out of range");
}

TEST(ReadTsvErrors, InvalidUtf8) {
  // A lone continuation byte, a truncated sequence, an overlong '/' and a UTF-16 surrogate.
  for (const std::string& bad : {std::string("\x80"), std::string("ab\xC3"),
                                 std::string("\xC0\xAF"), std::string("\xED\xA0\x80")}) {
    std::string p = WriteTmp("utf8.tsv", absl::StrCat("sentence\tlabel\nok\t0\n", bad, "\t1\n"));
    ExpectError(ReadTsv(p, 2), p, 3, "invalid UTF-8");
  }
}

TEST(ReadTsvErrors, WrongColumnCount) {
  std::string p = WriteTmp("cols_bad.tsv", "sentence\tlabel\na\t1\nb\t0\textra\n");
  ExpectError(ReadTsv(p, 2), p, 3, "wrong column count");
  std::string q = WriteTmp("cols_few.tsv", "sentence\tlabel\nno tab here\n");
  ExpectError(ReadTsv(q, 2), q, 2, "wrong column count");
}

TEST(ReadTsvErrors, EmptyFileAndNoExamples) {
  std::string p = WriteTmp("empty.tsv", "");
  ExpectError(ReadTsv(p, 2), p, 1, "empty file");
  std::string b = WriteTmp("blank.tsv", "\n\n");
  ExpectError(ReadTsv(b, 2), b, 1, "empty file");
  std::string h = WriteTmp("header_only.tsv", "sentence\tlabel\n");
  ExpectError(ReadTsv(h, 2), h, 2, "no examples");
}

TEST(ReadTsvErrors, BlankLineInTheMiddle) {
  std::string p = WriteTmp("mid.tsv", "sentence\tlabel\na\t1\n\nb\t0\n");
  ExpectError(ReadTsv(p, 2), p, 3, "empty line");
}

TEST(ReadTsvErrors, RefusesFilesOver4GiB) {
  // A sparse file: the size check happens before any byte is read, so this costs no disk.
  std::string p = WriteTmp("huge.tsv", "sentence\tlabel\n");
  ASSERT_EQ(::truncate(p.c_str(), (int64_t{1} << 32) + 1), 0);
  auto r = ReadTsv(p, 2);
  ::unlink(p.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("over the limit"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(p));
}

TEST(ReadTsvErrors, MissingFileNamesThePath) {
  auto r = ReadTsv("/nonexistent/dir/x.tsv", 2);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/dir/x.tsv"));
}

TEST(ReadTsvForPredict, LabelColumnIsOptional) {
  std::string p = WriteTmp("pred.tsv", "index\tsentence\n0\thello\n1\tworld\n");
  auto r = ReadTsvForPredict(p);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].sentence, "world");
  EXPECT_EQ((*r)[1].label, 0.0f);

  std::string q = WriteTmp("pred_label.tsv", "sentence\tlabel\nhello\t1\n");
  auto s = ReadTsvForPredict(q);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0].label, 1.0f);

  std::string bad = WriteTmp("pred_bad.tsv", "label\nhello\n");
  ExpectError(ReadTsvForPredict(bad), bad, 1, "missing column \"sentence\"");
  std::string badlabel = WriteTmp("pred_badlabel.tsv", "sentence\tlabel\nhello\t?\n");
  ExpectError(ReadTsvForPredict(badlabel), badlabel, 2, "not a finite number");
}

// In a one-column prediction input a blank line is the empty sentence (predicted as [CLS] [SEP]),
// trailing ones included: one output line per input line. With more columns, or when training,
// a blank line in the middle is still an error.
TEST(ReadTsvForPredict, BlankLineInOneColumnIsTheEmptySentence) {
  std::string p = WriteTmp("pred_blank.tsv", "sentence\nhello\n\r\nworld\n\n");
  auto r = ReadTsvForPredict(p);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].sentence, "hello");
  EXPECT_EQ((*r)[1].sentence, "");
  EXPECT_EQ((*r)[2].sentence, "world");
  EXPECT_EQ((*r)[3].sentence, "");
  std::string c = WriteTmp("pred_blank.csv", "sentence\nhello\n\nworld\n");
  auto s = ReadTableForPredict(c, TableOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[1].sentence, "");

  std::string two = WriteTmp("pred_blank2.tsv", "sentence\tid\nhello\t0\n\nworld\t1\n");
  ExpectError(ReadTsvForPredict(two), two, 3, "empty line");
  std::string train = WriteTmp("train_blank.tsv", "sentence\tlabel\nhello\t0\n\nworld\t1\n");
  ExpectError(ReadTsv(train, 2), train, 3, "empty line");
}

TEST(ParseTsv, InMemoryMatchesTheFileReader) {
  auto r = ParseTsv("sentence\tlabel\nfine\t1\nbad\t0\n", "mem.tsv", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].sentence, "bad");
  ExpectError(ParseTsv("sentence\tlabel\nx\t2\n", "mem.tsv", 2), "mem.tsv", 2, "out of range");
  auto p = ParseTsvForPredict("sentence\nno label\n", "mem.tsv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)[0].label, 0.0f);
  auto bad = ParseTsv("sentence\tlabel\nx\t0\n", "mem.tsv", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("mem.tsv: num_labels must be"));
}

TableOptions Columns(DataFormat format, std::string text, std::string label) {
  TableOptions o;
  o.format = format;
  o.text_column = std::move(text);
  o.label_column = std::move(label);
  return o;
}
TableOptions Csv(std::string text = "sentence", std::string label = "label") {
  return Columns(DataFormat::kCsv, std::move(text), std::move(label));
}
TableOptions Jsonl(std::string text = "sentence", std::string label = "label") {
  return Columns(DataFormat::kJsonl, std::move(text), std::move(label));
}

TEST(ResolveDataFormat, GoesByExtensionOnlyForAuto) {
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train.csv"), DataFormat::kCsv);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/TRAIN.CSV"), DataFormat::kCsv);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train.jsonl"), DataFormat::kJsonl);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train.json"), DataFormat::kJsonl);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train.ndjson"), DataFormat::kJsonl);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train.tsv"), DataFormat::kTsv);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kAuto, "d/train"), DataFormat::kTsv);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kTsv, "d/train.csv"), DataFormat::kTsv);
  EXPECT_EQ(ResolveDataFormat(DataFormat::kCsv, "d/train.txt"), DataFormat::kCsv);
}

TEST(SplitCsvRecord, FollowsRfc4180) {
  std::vector<std::string> f;
  bool open = true;
  ASSERT_TRUE(SplitCsvRecord("a,\"b, c\",\"say \"\"hi\"\"\",", &f, &open).ok());
  EXPECT_FALSE(open);
  EXPECT_THAT(f, ::testing::ElementsAre("a", "b, c", "say \"hi\"", ""));
  ASSERT_TRUE(SplitCsvRecord("\"\",x\"y\"", &f, &open).ok());
  EXPECT_THAT(f, ::testing::ElementsAre("", "x\"y\""));  // a quote mid-field is literal
  ASSERT_TRUE(SplitCsvRecord("a,\"two\nlines", &f, &open).ok());
  EXPECT_TRUE(open);
  absl::Status bad = SplitCsvRecord("a,\"b\"c", &f, &open);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.message()), HasSubstr("field 2"));
}

TEST(ReadTable, CsvWithQuotesMultilineFieldsAndOtherColumns) {
  std::string p = WriteTmp(
      "ok.csv",
      "\xEF\xBB\xBFid,review,stars\r\n1,\"great, really\",1\r\n2,\"said \"\"meh\"\"\r\nthen left\","
      "0\r\n3,plain,1");
  auto r = ReadTable(p, Csv("review", "stars"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].sentence, "great, really");
  EXPECT_EQ((*r)[0].label, 1.0f);
  EXPECT_EQ((*r)[1].sentence, "said \"meh\"\nthen left");
  EXPECT_EQ((*r)[1].label, 0.0f);
  EXPECT_EQ((*r)[2].sentence, "plain");
  // By extension, with the default column names.
  std::string q = WriteTmp("plain.csv", "sentence,label\nhello,1\n");
  auto s = ReadTable(q, TableOptions{}, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0].sentence, "hello");
}

TEST(ReadTableErrors, CsvNamesTheRecordsLine) {
  std::string p = WriteTmp("open.csv", "sentence,label\na,1\n\"never\nclosed,0\n");
  ExpectError(ReadTable(p, Csv(), 2), p, 3, "quoted field not closed");
  std::string q = WriteTmp("count.csv", "sentence,label\n\"two\nlines\",1,extra\n");
  ExpectError(ReadTable(q, Csv(), 2), q, 2, "wrong column count");
  std::string c = WriteTmp("col.csv", "text,label\na,1\n");
  ExpectError(ReadTable(c, Csv("review"), 2), c, 1, "missing column \"review\"");
  std::string l = WriteTmp("lab.csv", "sentence,label\na,1\nb,2\n");
  ExpectError(ReadTable(l, Csv(), 2), l, 3, "out of range [0, 2)");
  std::string g = WriteTmp("garbage.csv", "sentence,label\n\"a\"b,1\n");
  ExpectError(ReadTable(g, Csv(), 2), g, 2, "after a closing quote");
  // A blank line inside quotes is text; outside, it is the same error as in TSV.
  std::string b = WriteTmp("blank.csv", "sentence,label\n\"a\n\nb\",1\n\nc,0\n");
  ExpectError(ReadTable(b, Csv(), 2), b, 5, "empty line");
}

TEST(ReadTable, JsonLinesByKey) {
  std::string p = WriteTmp("ok.jsonl",
                           "{\"text\": \"caf\\u00e9 \\\"ok\\\"\", \"y\": 1, \"id\": 7}\n"
                           "{\"y\": 0.0, \"text\": \"tab\\there\"}\n\n");
  auto r = ReadTable(p, Jsonl("text", "y"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].sentence, "caf\xC3\xA9 \"ok\"");
  EXPECT_EQ((*r)[0].label, 1.0f);
  EXPECT_EQ((*r)[1].sentence, "tab\there");
  EXPECT_EQ((*r)[1].label, 0.0f);
  std::string reg = WriteTmp("reg.jsonl", "{\"sentence\": \"a\", \"label\": 0.25}\n");
  auto g = ReadTable(reg, TableOptions{}, 1);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FLOAT_EQ((*g)[0].label, 0.25f);
}

TEST(ReadTableErrors, JsonLines) {
  auto check = [](const std::string& name, const std::string& body, int line,
                  const std::string& phrase) {
    std::string p = WriteTmp(name, body);
    ExpectError(ReadTable(p, Jsonl(), 2), p, line, phrase);
  };
  check("bad.jsonl", "{\"sentence\": \"a\", \"label\": 1}\n{oops\n", 2, "not valid JSON");
  check("arr.jsonl", "[1, 2]\n", 1, "not a JSON object");
  check("nokey.jsonl", "{\"text\": \"a\", \"label\": 1}\n", 1, "missing key \"sentence\"");
  check("nolab.jsonl", "{\"sentence\": \"a\"}\n", 1, "missing key \"label\"");
  check("num.jsonl", "{\"sentence\": 5, \"label\": 1}\n", 1, "\"sentence\" is not a string");
  check("frac.jsonl", "{\"sentence\": \"a\", \"label\": 0.5}\n", 1, "not an integer");
  check("range.jsonl", "{\"sentence\": \"a\", \"label\": 2}\n", 1, "out of range");
  check("bool.jsonl", "{\"sentence\": \"a\", \"label\": true}\n", 1, "is not a number or a string");
  check("mid.jsonl", "{\"sentence\": \"a\", \"label\": 1}\n\n{\"sentence\": \"b\", \"label\": 0}\n",
        2, "empty line");
  check("empty.jsonl", "", 1, "empty file");
}

TEST(ReadTableForPredict, LabelIsOptionalInEveryFormat) {
  std::string c = WriteTmp("pred.csv", "id,sentence\n0,\"a, b\"\n");
  auto r = ReadTableForPredict(c, TableOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].sentence, "a, b");
  std::string j =
      WriteTmp("pred.jsonl", "{\"sentence\": \"x\"}\n{\"sentence\": \"y\", \"label\": 1}\n");
  auto s = ReadTableForPredict(j, TableOptions{});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].label, 0.0f);
  EXPECT_EQ((*s)[1].label, 1.0f);
}

TEST(ReadTable, TsvWithCustomColumnsAndTheTsvReadersIgnoreTheExtension) {
  std::string p = WriteTmp("cols.tsv", "text\ty\na\t1\n");
  auto r = ReadTable(p, Columns(DataFormat::kAuto, "text", "y"), 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].sentence, "a");
  // ReadTsv reads TSV whatever the name: a comma is text.
  std::string q = WriteTmp("named.csv", "sentence\tlabel\na,b\t1\n");
  auto s = ReadTsv(q, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0].sentence, "a,b");
}

TEST(ReadTable, SentencePairsInEveryFormat) {
  TableOptions o;
  o.text_column = "sentence1";
  o.text_pair_column = "sentence2";
  std::string t = WriteTmp("pairs.tsv", "sentence1\tsentence2\tlabel\na\tb c\t1\n");
  std::string c = WriteTmp("pairs.csv", "label,sentence2,sentence1\n1,\"b c\",a\n");
  std::string j =
      WriteTmp("pairs.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b c\", \"label\": 1}\n");
  for (const std::string& p : {t, c, j}) {
    auto r = ReadTable(p, o, 2);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->size(), 1u) << p;
    EXPECT_EQ((*r)[0].sentence, "a") << p;
    EXPECT_EQ((*r)[0].text_pair, "b c") << p;
    EXPECT_EQ((*r)[0].label, 1.0f) << p;
  }
  std::string m = WriteTmp("nopair.csv", "sentence1,label\na,1\n");
  ExpectError(ReadTable(m, o, 2), m, 1, "missing column \"sentence2\"");
  std::string k = WriteTmp("nopair.jsonl", "{\"sentence1\": \"a\", \"label\": 1}\n");
  ExpectError(ReadTable(k, o, 2), k, 1, "missing key \"sentence2\"");
}

TEST(ReadTable, StringLabelsFromAGivenList) {
  TableOptions o;
  o.labels = {"positive", "negative"};  // ids in this order, whatever the file's order
  std::string c = WriteTmp("named.csv", "sentence,label\na,negative\nb,positive\n");
  auto r = ReadTable(c, o, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].label, 1.0f);
  EXPECT_EQ((*r)[1].label, 0.0f);
  std::string j = WriteTmp("named.jsonl", "{\"sentence\": \"a\", \"label\": \"positive\"}\n");
  auto s = ReadTable(j, o, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0].label, 0.0f);
  std::string bad = WriteTmp("named_bad.csv", "sentence,label\na,negative\nb,neutral\n");
  ExpectError(ReadTable(bad, o, 2), bad, 3,
              "label \"neutral\" is not one of data.labels (positive, negative)");
  // predict: names map to ids; other cells must still be numbers.
  auto p = ReadTableForPredict(c, o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)[0].label, 1.0f);
}

TEST(ReadTable, StringLabelsInferredSortedWhenNotGiven) {
  std::string c = WriteTmp("infer.csv",
                           "sentence,label\na,neutral\nb,entailment\nc,contradiction\nd,neutral\n");
  absl::StatusOr<TsvLineParser> parser = TsvLineParser::ForTraining(c, 3);
  ASSERT_TRUE(parser.ok());
  auto r = ReadTable(c, TableOptions{}, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  // contradiction=0, entailment=1, neutral=2.
  EXPECT_EQ((*r)[0].label, 2.0f);
  EXPECT_EQ((*r)[1].label, 1.0f);
  EXPECT_EQ((*r)[2].label, 0.0f);
  EXPECT_EQ((*r)[3].label, 2.0f);
  // Too many or too few classes for num_labels.
  ExpectError(ReadTable(c, TableOptions{}, 2), c, 4, "is a class beyond num_labels 2");
  auto few = ReadTable(c, TableOptions{}, 4);
  ASSERT_FALSE(few.ok());
  EXPECT_THAT(
      std::string(few.status().message()),
      HasSubstr("3 distinct labels (neutral, entailment, contradiction) but num_labels is 4"));
  // An integer first label keeps the TSV rules: ids, and a word later is an error.
  std::string ids = WriteTmp("ids.tsv", "sentence\tlabel\na\t1\nb\tpositive\n");
  ExpectError(ReadTable(ids, TableOptions{}, 2), ids, 3, "not an integer");
}

}  // namespace
}  // namespace ringmaster::trainer
