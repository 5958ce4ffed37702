// Unicode helpers for the WordPiece tokenizer: UTF-8 coding with Python's error handling and
// the character classes of Hugging Face's BasicTokenizer, evaluated the way CPython 3.11's
// `unicodedata` (Unicode 14.0) evaluates them. libutf8proc supplies the data; it is one Unicode
// version newer (15.0), so the characters first assigned in 15.0 are reported as unassigned
// here, which is what the Python reference sees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::trainer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one character of `s` starting at byte `pos` (< s.size()) into `*cp` and returns the
// number of bytes it used. Invalid input yields U+FFFD and consumes the maximal ill-formed
// subpart, exactly like Python's bytes.decode("utf-8", "replace"): a byte that cannot continue
// the sequence is never swallowed, so the text after a bad byte decodes as it would alone.
size_t DecodeUtf8Char(std::string_view s, size_t pos, char32_t* cp);

// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
void AppendUtf8(char32_t cp, std::string* out);

// True when `s` is well-formed UTF-8 (no surrogates, overlongs or values past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Number of code points in well-formed UTF-8 (counts bytes that are not continuation bytes).
size_t CountUtf8Chars(std::string_view s);

// True for the code points that Unicode 15.0 assigned and 14.0 had not: libutf8proc knows them,
// Python 3.11 calls them category Cn.
bool IsNewInUnicode15(char32_t cp);

// The general category as Python 3.11 reports it, as a utf8proc_category_t value.
int PyCategory(char32_t cp);

// HF `_is_control`: any category C* (Cc, Cf, Cs, Co, Cn) except \t \n \r.
bool IsHfControl(char32_t cp);

// HF `_is_whitespace`: space, \t, \n, \r, or category Zs.
bool IsHfWhitespace(char32_t cp);

// HF `_is_punctuation`: ASCII non-alphanumeric symbols, or category P*.
bool IsHfPunctuation(char32_t cp);

// HF `_is_chinese_char`: the CJK ideograph blocks BERT splits into single characters.
bool IsHfChineseChar(char32_t cp);

// True for the characters Python's str.split() treats as separators that can survive HF's
// `_clean_text`: space (everything else it splits on is a control character or Zs, which the
// cleaning drops or turns into a space) and U+2028 / U+2029 (categories Zl / Zp, untouched).
inline bool IsSplitSpaceAfterClean(char32_t cp) {
  return cp == ' ' || cp == 0x2028 || cp == 0x2029;
}

// Python's `chr(cp).lower()` for every code point except U+0130 (see AppendPyLower).
char32_t SimpleLower(char32_t cp);

// Category Mn (nonspacing mark), which HF's accent stripping removes after NFD.
bool IsNonspacingMark(char32_t cp);

// Appends Python's `chr(cp).lower()`: the simple lowercase mapping, except U+0130 (capital I with
// dot above), whose full lowercase mapping is two code points, "i" + U+0307.
void AppendPyLower(char32_t cp, std::u32string* out);

// Canonical composition (NFC) or decomposition (NFD) of well-formed UTF-8 `in`, written to
// `*out` as code points. Uses `*scratch` as the working buffer so that repeated calls do not
// allocate.
void NormalizeNfc(std::string_view in, std::vector<int32_t>* scratch, std::u32string* out);
void NormalizeNfd(std::string_view in, std::vector<int32_t>* scratch, std::u32string* out);

}  // namespace ringmaster::trainer
