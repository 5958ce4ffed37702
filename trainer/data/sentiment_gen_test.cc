#include "trainer/data/sentiment_gen.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "trainer/data/tsv.h"
#include "trainer/text/wordpiece.h"

namespace ringmaster::trainer {
namespace {

constexpr int kTrain = 8000;  // the demo sizes
constexpr int kDev = 1000;

const GeneratedDataset& Demo() {
  static const GeneratedDataset* d =
      new GeneratedDataset(GenerateSentimentDataset(1, kTrain, kDev));
  return *d;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// BERT basic tokenization of ASCII text: lower-case, whitespace split, punctuation split off.
std::vector<std::string> BasicTokens(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (unsigned char c : s) {
    if (std::isspace(c) || std::ispunct(c)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (std::ispunct(c)) out.emplace_back(1, static_cast<char>(c));
    } else {
      cur += static_cast<char>(std::tolower(c));
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Greedy longest-match-first WordPiece; false when some piece is missing (BERT emits [UNK]).
bool WordPieces(const std::string& word, const std::unordered_set<std::string>& vocab,
                std::vector<std::string>* pieces) {
  size_t start = 0;
  while (start < word.size()) {
    size_t end = word.size();
    std::string found;
    for (; end > start; --end) {
      std::string piece = (start > 0 ? "##" : "") + word.substr(start, end - start);
      if (vocab.count(piece)) {
        found = piece;
        break;
      }
    }
    if (found.empty()) return false;
    if (pieces) pieces->push_back(found);
    start = end;
  }
  return true;
}

std::string TempDir(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/sentiment_gen_test_", ::getpid(), "_", name);
}

TEST(SentimentGen, DeterministicForSeed) {
  GeneratedDataset a = GenerateSentimentDataset(7, 300, 50);
  GeneratedDataset b = GenerateSentimentDataset(7, 300, 50);
  EXPECT_EQ(a.train_sentences, b.train_sentences);
  EXPECT_EQ(a.train_labels, b.train_labels);
  EXPECT_EQ(a.dev_sentences, b.dev_sentences);
  EXPECT_EQ(a.dev_labels, b.dev_labels);
  GeneratedDataset c = GenerateSentimentDataset(8, 300, 50);
  EXPECT_NE(a.train_sentences, c.train_sentences);
}

// Pins the first sentences of seed 1, so that a change to the grammar or sampling (or a
// platform difference) is noticed: the demo's published accuracy depends on this exact data.
TEST(SentimentGen, StableAcrossBuilds) {
  GeneratedDataset d = GenerateSentimentDataset(1, 4, 0);
  ASSERT_EQ(d.train_sentences.size(), 4u);
  const std::vector<std::string> golden = {
      "The audiobook was somewhat captivating but repetitive.",
      "I considered this radio show far from captivating. I would never put it on again .",
      "I didn't hate it...",
      "\"Lackluster\" is the last word I would use for the podcast.",
  };
  EXPECT_EQ(d.train_sentences, golden);
  EXPECT_EQ(d.train_labels, (std::vector<int>{0, 0, 1, 1}));
}

TEST(SentimentGen, SizesAndBalance) {
  const GeneratedDataset& d = Demo();
  ASSERT_EQ(d.train_sentences.size(), static_cast<size_t>(kTrain));
  ASSERT_EQ(d.train_labels.size(), static_cast<size_t>(kTrain));
  ASSERT_EQ(d.dev_sentences.size(), static_cast<size_t>(kDev));
  ASSERT_EQ(d.dev_labels.size(), static_cast<size_t>(kDev));
  for (const auto* labels : {&d.train_labels, &d.dev_labels}) {
    int pos = 0;
    for (int l : *labels) {
      ASSERT_TRUE(l == 0 || l == 1) << l;
      pos += l;
    }
    double share = static_cast<double>(pos) / labels->size();
    EXPECT_GE(share, 0.45);
    EXPECT_LE(share, 0.55);
  }
  // Odd sizes and zero are honoured too.
  GeneratedDataset odd = GenerateSentimentDataset(3, 11, 0);
  EXPECT_EQ(odd.train_sentences.size(), 11u);
  EXPECT_TRUE(odd.dev_sentences.empty());
}

TEST(SentimentGen, NoDuplicatesAndNoTrainDevOverlap) {
  const GeneratedDataset& d = Demo();
  // Compared loosely (case and punctuation ignored), which also rules out verbatim copies.
  auto key = [](const std::string& s) {
    std::string k;
    for (const std::string& t : BasicTokens(s)) {
      if (std::isalnum(static_cast<unsigned char>(t[0]))) k += t + " ";
    }
    return k;
  };
  std::unordered_set<std::string> train;
  for (const std::string& s : d.train_sentences) {
    EXPECT_TRUE(train.insert(key(s)).second) << "duplicate in train: " << s;
  }
  for (const std::string& s : d.dev_sentences) {
    EXPECT_FALSE(train.count(key(s))) << "dev sentence also in train: " << s;
  }
}

TEST(SentimentGen, ShortSentencesWithVariedSurface) {
  const GeneratedDataset& d = Demo();
  int in_range = 0, longest = 0;
  int negation = 0, contrast = 0, question = 0, quote = 0, lower_only = 0, capitalized = 0;
  for (const std::string& s : d.train_sentences) {
    std::vector<std::string> words = absl::StrSplit(s, ' ', absl::SkipEmpty());
    int n = static_cast<int>(words.size());
    longest = std::max(longest, n);
    in_range += n >= 6 && n <= 25;
    std::string l = Lower(s);
    negation += l.find("not ") != std::string::npos || l.find("n't ") != std::string::npos;
    contrast += l.find(" but ") != std::string::npos || l.find("although") != std::string::npos;
    question += s.find('?') != std::string::npos;
    quote += s.find('"') != std::string::npos;
    lower_only += l == s;
    capitalized += std::isupper(static_cast<unsigned char>(s[0])) != 0;
    ASSERT_EQ(s.find_first_of("\t\n\r"), std::string::npos) << s;
  }
  const double n = d.train_sentences.size();
  EXPECT_GE(in_range / n, 0.85) << "mostly 6-25 words";
  EXPECT_LE(longest, 40);
  EXPECT_GE(negation / n, 0.2);
  EXPECT_GE(contrast / n, 0.15);
  EXPECT_GE(question / n, 0.05);
  EXPECT_GE(quote / n, 0.02);
  EXPECT_GE(lower_only / n, 0.1);
  EXPECT_GE(capitalized / n, 0.5);
}

// Unambiguous constructions must carry the label their meaning says; each probe must match
// something, so a grammar change that drops a construction is noticed too.
TEST(SentimentGen, ProbesCarryTheRightLabel) {
  struct Probe {
    const char* pattern;
    int label;
  };
  // With commas dropped, "<verdict> although <concession>" could end in the concession's words,
  // which these end-anchored probes would misread.
  const Probe probes[] = {
      {R"((hated|despised|loathed) it,? but i (loved|enjoyed|adored|liked) it)", 1},
      {R"((loved|enjoyed|adored|liked) it,? but i (hated|despised|loathed|disliked) it)", 0},
      {R"(^(was|is) [a-z -]+ (boring|dull|bad|awful|terrible)\? (no|not at all|nope|hardly))", 1},
      {R"(^(was|is) [a-z -]+ (good|great|wonderful|excellent)\? (no|not at all|nope|hardly))", 0},
      {R"(would be (boring|dull|bad|awful|terrible),? and they were (wrong|completely wrong))", 1},
      {R"(not a single (dull|boring|bad) )", 1},
      {R"(not a single (good|great|memorable) )", 0},
      {R"(never fails to (delight|impress|entertain))", 1},
      {R"(never fails to (bore|disappoint|annoy))", 0},
      {R"(^[a-z -]+ (was not|is not|wasn't|isn't|was never|is never) )"
       R"((bad|boring|dull|awful|terrible|dreadful|horrible|mediocre|weak|bland|poor|lousy))"
       R"(( at all)?[ .!]*$)",
       1},
      {R"(^[a-z -]+ (was not|is not|wasn't|isn't|was never|is never) )"
       R"((good|great|wonderful|excellent|brilliant|superb|fantastic|charming|lovely|amazing))"
       R"(( at all)?[ .!]*$)",
       0},
      {R"(barely (watchable|readable|edible|playable|listenable))", 0},
  };
  for (const Probe& p : probes) {
    std::regex re(p.pattern);
    int matched = 0;
    for (size_t i = 0; i < Demo().train_sentences.size(); ++i) {
      const std::string l = Lower(Demo().train_sentences[i]);
      if (l.find("though") != std::string::npos || !std::regex_search(l, re)) continue;
      ++matched;
      EXPECT_EQ(Demo().train_labels[i], p.label) << p.pattern << " in: " << l;
    }
    EXPECT_GT(matched, 0) << "no sentence matches " << p.pattern;
  }
}

// A unigram (set-of-words) classifier: logistic regression trained by SGD.
class Unigram {
 public:
  Unigram(const std::vector<std::string>& x, const std::vector<int>& y) {
    std::vector<std::vector<int>> feats;
    for (const std::string& s : x) feats.push_back(Features(s, /*grow=*/true));
    w_.assign(ids_.size(), 0.0);
    std::vector<size_t> order(x.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::mt19937_64 rng(5);
    for (int epoch = 0; epoch < 20; ++epoch) {
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i : order) {
        double p = 1.0 / (1.0 + std::exp(-Score(feats[i])));
        double g = p - y[i];
        b_ -= 0.05 * g;
        for (int f : feats[i]) w_[f] -= 0.05 * (g + 1e-4 * w_[f]);
      }
    }
  }
  double Accuracy(const std::vector<std::string>& x, const std::vector<int>& y) {
    int right = 0;
    for (size_t i = 0; i < x.size(); ++i)
      right += (Score(Features(x[i], false)) > 0) == (y[i] == 1);
    return static_cast<double>(right) / x.size();
  }

 private:
  std::vector<int> Features(const std::string& s, bool grow) {
    std::set<int> f;
    for (const std::string& t : BasicTokens(s)) {
      auto it = ids_.find(t);
      if (it != ids_.end()) {
        f.insert(it->second);
      } else if (grow) {
        int id = static_cast<int>(ids_.size());
        ids_[t] = id;
        f.insert(id);
      }
    }
    return {f.begin(), f.end()};
  }
  double Score(const std::vector<int>& f) const {
    double z = b_;
    for (int i : f) z += w_[i];
    return z;
  }
  std::unordered_map<std::string, int> ids_;
  std::vector<double> w_;
  double b_ = 0;
};

// Multinomial naive Bayes on word presence, with add-one smoothing.
double NaiveBayesAccuracy(const GeneratedDataset& d) {
  std::unordered_map<std::string, double> count[2];
  double docs[2] = {0, 0};
  for (size_t i = 0; i < d.train_sentences.size(); ++i) {
    int y = d.train_labels[i];
    ++docs[y];
    std::set<std::string> seen;
    for (const std::string& t : BasicTokens(d.train_sentences[i])) {
      if (seen.insert(t).second) ++count[y][t];
    }
  }
  int right = 0;
  for (size_t i = 0; i < d.dev_sentences.size(); ++i) {
    double score[2] = {std::log(docs[0]), std::log(docs[1])};
    std::set<std::string> seen;
    for (const std::string& t : BasicTokens(d.dev_sentences[i])) {
      if (!seen.insert(t).second) continue;
      if (!count[0].count(t) && !count[1].count(t)) continue;
      for (int c = 0; c < 2; ++c) score[c] += std::log((count[c][t] + 1) / (docs[c] + 2));
    }
    right += (score[1] > score[0]) == (d.dev_labels[i] == 1);
  }
  return static_cast<double>(right) / d.dev_sentences.size();
}

TEST(SentimentGen, BagOfWordsFails) {
  const GeneratedDataset& d = Demo();
  Unigram lr(d.train_sentences, d.train_labels);
  double lr_acc = lr.Accuracy(d.dev_sentences, d.dev_labels);
  double nb_acc = NaiveBayesAccuracy(d);
  std::printf("unigram baselines, dev accuracy: logistic regression %.3f, naive Bayes %.3f\n",
              lr_acc, nb_acc);
  EXPECT_LT(lr_acc, 0.85);
  EXPECT_LT(nb_acc, 0.85);

  // Control: the same classifier on the same sentences with a label that words do decide
  // (does the sentence mention the subject's aspects in the plural?) must do well, so the
  // failure above comes from the data, not from a broken classifier.
  auto word_label = [](const std::string& s) {
    std::string l = Lower(s);
    return (l.find(" were ") != std::string::npos || l.find(" are ") != std::string::npos) ? 1 : 0;
  };
  std::vector<int> train_y, dev_y;
  for (const std::string& s : d.train_sentences) train_y.push_back(word_label(s));
  for (const std::string& s : d.dev_sentences) dev_y.push_back(word_label(s));
  Unigram control(d.train_sentences, train_y);
  double control_acc = control.Accuracy(d.dev_sentences, dev_y);
  std::printf("control task (word-decidable label), dev accuracy %.3f\n", control_acc);
  EXPECT_GT(control_acc, 0.97);
}

TEST(SentimentGen, WritesFilesThatParseBack) {
  const std::string dir = TempDir("files");
  ASSERT_TRUE(WriteSentimentDataset(dir, 1, kTrain, kDev).ok());
  const GeneratedDataset& d = Demo();
  auto train = ReadTsv(dir + "/train.tsv", 2);
  ASSERT_TRUE(train.ok()) << train.status();
  auto dev = ReadTsv(dir + "/dev.tsv", 2);
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_EQ(train->size(), d.train_sentences.size());
  ASSERT_EQ(dev->size(), d.dev_sentences.size());
  for (size_t i = 0; i < train->size(); ++i) {
    ASSERT_EQ((*train)[i].sentence, d.train_sentences[i]);
    ASSERT_EQ((*train)[i].label, static_cast<float>(d.train_labels[i]));
  }
  for (size_t i = 0; i < dev->size(); ++i) {
    ASSERT_EQ((*dev)[i].sentence, d.dev_sentences[i]);
    ASSERT_EQ((*dev)[i].label, static_cast<float>(d.dev_labels[i]));
  }
  auto header = ReadFile(dir + "/train.tsv");
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->substr(0, 15), "sentence\tlabel\n");

  // Same seed, same bytes.
  const std::string again = TempDir("again");
  ASSERT_TRUE(WriteSentimentDataset(again, 1, kTrain, kDev).ok());
  for (const char* f : {"/train.tsv", "/dev.tsv", "/vocab.txt"}) {
    EXPECT_EQ(*ReadFile(dir + f), *ReadFile(again + f)) << f;
  }
}

TEST(SentimentGen, VocabCoversEveryWord) {
  const std::string dir = TempDir("vocab");
  ASSERT_TRUE(WriteSentimentDataset(dir, 1, kTrain, kDev).ok());
  auto text = ReadFile(dir + "/vocab.txt");
  ASSERT_TRUE(text.ok()) << text.status();
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(lines.begin(), lines.begin() + 5),
            (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}));
  std::unordered_set<std::string> vocab(lines.begin(), lines.end());
  EXPECT_EQ(vocab.size(), lines.size()) << "duplicate vocab entries";
  for (size_t i = 5; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i], Lower(lines[i])) << "vocab must be lower case for an uncased model";
  }

  const GeneratedDataset& d = Demo();
  size_t words = 0;
  for (const auto* split : {&d.train_sentences, &d.dev_sentences}) {
    for (const std::string& s : *split) {
      for (const std::string& t : BasicTokens(s)) {
        std::vector<std::string> pieces;
        ASSERT_TRUE(WordPieces(t, vocab, &pieces)) << "[UNK] for \"" << t << "\" in: " << s;
        // Every word of the data is a whole vocabulary entry, so none needs splitting.
        EXPECT_EQ(pieces.size(), 1u) << t;
        ++words;
      }
    }
  }
  EXPECT_GT(words, 50000u);
  // Words never generated still tokenize, through the letter and digit pieces.
  for (const char* w : {"zyzzyva", "qwxj42", "x9"}) {
    EXPECT_TRUE(WordPieces(w, vocab, nullptr)) << w;
  }
  EXPECT_LT(lines.size(), 3000u) << "the vocab should stay small for the demo model";
}

TEST(SentimentGen, TokenizerEncodesWithoutUnk) {
  const std::string dir = TempDir("tokenizer");
  ASSERT_TRUE(WriteSentimentDataset(dir, 1, kTrain, kDev).ok());
  auto tok = WordPieceTokenizer::FromVocabFile(dir + "/vocab.txt", /*do_lower_case=*/true);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const SpecialTokenIds& sp = tok->special();
  EXPECT_EQ(sp.pad, 0);
  EXPECT_EQ(sp.unk, 1);
  EXPECT_EQ(sp.cls, 2);
  EXPECT_EQ(sp.sep, 3);
  EXPECT_EQ(sp.mask, 4);
  size_t longest = 0;
  for (const auto* split : {&Demo().train_sentences, &Demo().dev_sentences}) {
    for (const std::string& s : *split) {
      std::vector<int32_t> ids = tok->Encode(s, 512);
      ASSERT_GE(ids.size(), 3u) << s;
      EXPECT_EQ(ids.front(), sp.cls);
      EXPECT_EQ(ids.back(), sp.sep);
      for (int32_t id : ids) ASSERT_NE(id, sp.unk) << s;
      longest = std::max(longest, ids.size());
    }
  }
  // The demo trains with max_len 64; nothing should need truncating.
  EXPECT_LE(longest, 64u);
}

}  // namespace
}  // namespace ringmaster::trainer
