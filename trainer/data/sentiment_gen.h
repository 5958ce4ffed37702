// A generated English sentiment data set for the demo, written by our own grammar (no copied
// corpora). It is built so that counting words is not enough: every sentiment word shows up about
// as often in positive as in negative sentences, and the label depends on how words combine —
// negation ("not bad at all"), contrast ("good but boring", "although it was slow, the ending was
// wonderful"), whose opinion a clause states ("my friend hated it, but I loved it"), double
// negation ("not without charm", "not a single dull moment"), questions with answers ("was it
// boring? not at all"), quotes, intensifiers and diminishers ("barely watchable"), and neutral
// clauses about plot, people or weather. Label 1 is positive, 0 negative; classes are balanced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ringmaster::trainer {

struct GeneratedDataset {
  std::vector<std::string> train_sentences;
  std::vector<int> train_labels;
  std::vector<std::string> dev_sentences;
  std::vector<int> dev_labels;
};

// Deterministic for a seed on every platform (own sampling on std::mt19937_64, no standard
// distributions). Sentences keep natural casing and are unique within and across the splits
// (compared case- and punctuation-insensitively), so no dev sentence appears in train. Each
// split has floor(n/2) negatives and the rest positives, in random order. (A slot would be
// dropped only if 10000 draws in a row repeated earlier sentences; the grammar is far too large
// for that at any practical size.)
GeneratedDataset GenerateSentimentDataset(uint64_t seed, int num_train, int num_dev);

// Writes, atomically and creating `dir` if needed:
//   DIR/train.tsv, DIR/dev.tsv  SST-2 style: header "sentence\tlabel", one example per line;
//   DIR/vocab.txt               a WordPiece vocabulary for an uncased BERT: [PAD] [UNK] [CLS]
//                               [SEP] [MASK] (ids 0..4), every punctuation character used, every
//                               lowercased word of both splits, then a..z, ##a..##z, 0..9 and
//                               ##0..##9 so that any ASCII word still tokenizes without [UNK].
// Demo sizes: 8000 train, 1000 dev.
absl::Status WriteSentimentDataset(const std::string& dir, uint64_t seed, int num_train,
                                   int num_dev);

}  // namespace ringmaster::trainer
