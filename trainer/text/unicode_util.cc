#include "trainer/text/unicode_util.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

namespace ringmaster::trainer {
namespace {

bool InRange(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

struct CpRange {
  char32_t lo, hi;
};

// Code points assigned by Unicode 15.0 that were unassigned in 14.0, computed by comparing
// libutf8proc 2.8 (Unicode 15.0) with CPython 3.11's unicodedata (14.0) over all code points;
// no other category, lowercase or single-character normalization difference exists. Sorted.
constexpr CpRange kNewInUnicode15[] = {
    {0x0CF3, 0x0CF3},   {0x0ECE, 0x0ECE},   {0x10EFD, 0x10EFF}, {0x1123F, 0x11241},
    {0x11B00, 0x11B09}, {0x11F00, 0x11F10}, {0x11F12, 0x11F3A}, {0x11F3E, 0x11F59},
    {0x1342F, 0x1342F}, {0x13439, 0x13455}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155},
    {0x1D2C0, 0x1D2D3}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E4D0, 0x1E4F9}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F},
    {0x1F7D9, 0x1F7D9}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA88}, {0x1FAAD, 0x1FAAF},
    {0x1FABB, 0x1FABD}, {0x1FABF, 0x1FABF}, {0x1FACE, 0x1FACF}, {0x1FADA, 0x1FADB},
    {0x1FAE8, 0x1FAE8}, {0x1FAF7, 0x1FAF8}, {0x2B739, 0x2B739}, {0x31350, 0x323AF},
};

// Runs utf8proc's decomposition (which also puts combining marks in canonical order) and, for
// NFC, its composition step, growing `scratch` when the first guess at the size is too small.
void Normalize(std::string_view in, utf8proc_option_t options, std::vector<int32_t>* scratch,
               std::u32string* out) {
  out->clear();
  if (in.empty()) return;
  if (scratch->size() < in.size() + 16) scratch->resize(in.size() + 16);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(in.data());
  utf8proc_ssize_t n;
  for (;;) {
    n = utf8proc_decompose(bytes, static_cast<utf8proc_ssize_t>(in.size()), scratch->data(),
                           static_cast<utf8proc_ssize_t>(scratch->size()), options);
    if (n < 0) return;  // Only for ill-formed input, which callers never pass.
    if (static_cast<size_t>(n) <= scratch->size()) break;
    scratch->resize(static_cast<size_t>(n));
  }
  if (options & UTF8PROC_COMPOSE) {
    n = utf8proc_normalize_utf32(scratch->data(), n, options);
    if (n < 0) return;
  }
  out->assign(scratch->begin(), scratch->begin() + n);
}

}  // namespace

size_t DecodeUtf8Char(std::string_view s, size_t pos, char32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  *cp = kReplacementChar;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (InRange(b0, 0xC2, 0xDF)) {
    len = 2;
  } else if (InRange(b0, 0xE0, 0xEF)) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (InRange(b0, 0xF0, 0xF4)) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 1;  // continuation byte, C0/C1 or F5..FF: never a valid lead
  }
  if (avail < 2 || !InRange(p[1], lo, hi)) return 1;
  for (size_t i = 2; i < len; ++i) {
    if (avail <= i || !InRange(p[i], 0x80, 0xBF)) return i;
  }
  char32_t v = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) v = (v << 6) | (p[i] & 0x3F);
  *cp = v;
  return len;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    size_t n = DecodeUtf8Char(s, pos, &cp);
    // Errors decode to U+FFFD too; only its own encoding is a genuine U+FFFD.
    if (cp == kReplacementChar && s.substr(pos, n) != "\xEF\xBF\xBD") return false;
    pos += n;
  }
  return true;
}

size_t CountUtf8Chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsNewInUnicode15(char32_t cp) {
  if (cp < kNewInUnicode15[0].lo) return false;
  auto it = std::upper_bound(std::begin(kNewInUnicode15), std::end(kNewInUnicode15), cp,
                             [](char32_t v, const CpRange& r) { return v < r.lo; });
  return it != std::begin(kNewInUnicode15) && cp <= std::prev(it)->hi;
}

int PyCategory(char32_t cp) {
  int cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  if (cat != UTF8PROC_CATEGORY_CN && IsNewInUnicode15(cp)) return UTF8PROC_CATEGORY_CN;
  return cat;
}

bool IsHfControl(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
  switch (PyCategory(cp)) {
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
      return true;
    default:
      return false;
  }
}

bool IsHfWhitespace(char32_t cp) {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return true;
  if (cp < 0x80) return false;
  return PyCategory(cp) == UTF8PROC_CATEGORY_ZS;
}

bool IsHfPunctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) {
    return true;
  }
  if (cp < 0x80) return false;
  int cat = PyCategory(cp);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool IsHfChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

char32_t SimpleLower(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

bool IsNonspacingMark(char32_t cp) { return cp >= 0x80 && PyCategory(cp) == UTF8PROC_CATEGORY_MN; }

void AppendPyLower(char32_t cp, std::u32string* out) {
  if (cp == 0x130) {
    out->push_back('i');
    out->push_back(0x307);
  } else {
    out->push_back(SimpleLower(cp));
  }
}

void NormalizeNfc(std::string_view in, std::vector<int32_t>* scratch, std::u32string* out) {
  Normalize(in, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE), scratch, out);
}

void NormalizeNfd(std::string_view in, std::vector<int32_t>* scratch, std::u32string* out) {
  Normalize(in, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE), scratch, out);
}

}  // namespace ringmaster::trainer
