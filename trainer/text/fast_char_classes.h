// The character classes of Hugging Face's fast BERT tokenizer (the Rust `tokenizers` library,
// 0.19: BertNormalizer and BertPreTokenizer), as differences from the slow tokenizer's classes in
// unicode_util.h. The Rust library's Unicode tables are older than Python 3.11's Unicode 14, and
// it defines some classes differently; every difference below was measured by running each code
// point through both libraries (tests/oracle/tokenizer_fast_slow_ranges.py) and is tested against
// the fast tokenizer by wordpiece_oracle_test.
#pragma once

namespace ringmaster::trainer {

// Dropped by the fast BertNormalizer's text cleaning: NUL and U+FFFD like the slow one, and the
// categories Cc, Cf and Co except \t \n \r. Unlike the slow tokenizer it keeps unassigned code
// points (Cn), and five format characters too recent for its tables (U+0890-U+0891, U+08E2,
// U+110CD, U+13430-U+13438).
bool IsFastDropped(char32_t cp);

// The fast tokenizer's CJK ideographs, spaced out into words of their own: the slow ranges
// (IsHfChineseChar) except U+2B820-U+2B91F, which its table leaves out.
bool IsFastChineseChar(char32_t cp);

// The fast BertPreTokenizer's punctuation: the slow set (IsHfPunctuation) less 104 characters
// Unicode assigned after its tables (e.g. U+061D, U+2E43-U+2E4F), plus U+166D and U+111C9,
// which were punctuation when those tables were made.
bool IsFastPunctuation(char32_t cp);

// The marks the fast tokenizer's accent stripping removes after NFD: category Mn less 384
// characters newer than its tables (e.g. U+0898-U+089F, U+1E000-U+1E006), plus U+1734, which it
// still classes as Mn.
bool IsFastNonspacingMark(char32_t cp);

// The one character with a canonical decomposition that the fast tokenizer's NFD leaves alone
// (U+11938 DIVES AKURU VOWEL SIGN O, decomposable since Unicode 13).
inline constexpr char32_t kFastUndecomposed = 0x11938;

}  // namespace ringmaster::trainer
