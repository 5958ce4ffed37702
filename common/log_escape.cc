#include "common/log_escape.h"

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

// Length of the well-formed UTF-8 sequence at the start of `s` (Unicode, table 3-7), or 0 when
// its first byte does not start one. ASCII is a sequence of length 1.
size_t SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto in = [&](size_t i, unsigned lo, unsigned hi) {
    return i < s.size() && b(i) >= lo && b(i) <= hi;
  };
  const unsigned b0 = b(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return in(1, 0x80, 0xbf) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    const unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80;  // E0 80..9F: overlong
    const unsigned hi = b0 == 0xed ? 0x9f : 0xbf;  // ED A0..BF: surrogates
    return in(1, lo, hi) && in(2, 0x80, 0xbf) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    const unsigned lo = b0 == 0xf0 ? 0x90 : 0x80;  // F0 80..8F: overlong
    const unsigned hi = b0 == 0xf4 ? 0x8f : 0xbf;  // F4 90..: past U+10FFFF
    return in(1, lo, hi) && in(2, 0x80, 0xbf) && in(3, 0x80, 0xbf) ? 4 : 0;
  }
  return 0;  // 80..C1 (continuation bytes, overlong leads), F5..FF
}

}  // namespace

std::string EscapeControlCharacters(std::string_view text, LineBreaks line_breaks) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = SequenceLength(text);
    const auto u = static_cast<unsigned char>(text[0]);
    if (n == 0) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
      text.remove_prefix(1);
      continue;
    }
    if (n == 1) {
      if (u == '\n') {
        out += line_breaks == LineBreaks::kKeep ? "\n" : "\\n";
      } else if (u == '\r') {
        out += "\\r";
      } else if ((u < 0x20 && u != '\t') || u == 0x7f) {
        absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
      } else {
        out += text[0];
      }
    } else if (n == 2 && u == 0xc2 && static_cast<unsigned char>(text[1]) < 0xa0) {
      // C1 control U+0080-U+009F.
      absl::StrAppend(&out, "\\u00",
                      absl::Hex(static_cast<unsigned char>(text[1]), absl::kZeroPad2));
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  return out;
}

size_t FirstInvalidUtf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t n = SequenceLength(text.substr(at));
    if (n == 0) return at;
    at += n;
  }
  return std::string_view::npos;
}

bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == std::string_view::npos; }

std::string_view Utf8Prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back off over continuation bytes to the start of the sequence the cap falls in (at most 3:
  // no well-formed sequence has more).
  while (end > 0 && max_bytes - end < 3 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

}  // namespace ringmaster
