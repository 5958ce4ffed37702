// Fuzzes the WordPiece tokenizer (trainer/text/wordpiece) on arbitrary text: the UTF-8 decoding
// (ill-formed bytes included), cleaning, lowercasing, NFD/NFC, punctuation and CJK splitting,
// the special-token cut and the greedy WordPiece search. The first byte picks cased/uncased and
// Encode's max_len; the rest is the text. The vocab is fixed: special tokens, whole words, "##"
// pieces, accented, CJK and multi-code-point tokens.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/tokenizer_check.h"

namespace rt = ringmaster::trainer;

namespace {

const rt::WordPieceTokenizer& Tokenizer(bool lower) {
  static const auto* tokenizers = [] {
    const std::vector<std::string> vocab = {
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",   "!",      ",",     ".",     "?",     "'",
        "-",     "the",   "a",     "un",    "##aff",    "##able", "##s",   "##ing", "play",  "Play",
        "é",     "##é",   "cafe",  "café",  "日",       "本",     "語",    "##語",  "ß",     "ss",
        "ﬁ",     "i",     "##i",   "İ",     "σ",        "ς",      "x",     "##x",   "##",    "#",
        "",      "ǅ",     "👍",     "##👍",   "ｆｕｌｌ", "naïve",  "naive", "hello", "world", "##,"};
    auto* t = new std::vector<rt::WordPieceTokenizer>();
    for (bool l : {false, true}) {
      auto made = rt::WordPieceTokenizer::FromVocabTokens(vocab, l, "fuzz vocab");
      FUZZ_CHECK(made.ok(), "the fixed vocab loads");
      t->push_back(*std::move(made));
    }
    return t;
  }();
  return (*tokenizers)[lower ? 1 : 0];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool lower = (data[0] & 1) != 0;
  const int max_len = 2 + (data[0] >> 1);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  ringmaster::fuzz::CheckTokenization(Tokenizer(lower), text, max_len);
  return 0;
}
