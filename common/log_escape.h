// Text that came from elsewhere (trainer output, agents, job files, the network), made safe for
// the wire, logs and terminals (issues #20, #31): one sanitiser for all of them.
//
// The result is always well-formed UTF-8 (protobuf `string` fields must be: a single byte above
// 0x7f in a RankProgress made the coordinator drop the agent's stream, issue #31) and holds no
// control character that could end a log line early, forge the next one or drive a terminal:
//   - a byte that is not part of a well-formed UTF-8 sequence (a lone continuation byte, an
//     overlong form, a surrogate, a sequence cut short, a value past U+10FFFF, 0xc0, 0xc1,
//     0xf5-0xff) is written "\xNN", byte by byte;
//   - newline and carriage return are written "\n" and "\r", other C0 controls (below 0x20,
//     tab excepted) and DEL "\xNN";
//   - C1 controls (U+0080-U+009F, e.g. U+009B, which some terminals take for CSI) "\u00NN";
//   - everything else, valid multi-byte UTF-8 included, stays as it is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringmaster {

// From now on, logged messages (common/log.h) are written through EscapeControlCharacters. The
// coordinator and the agent turn it on; the trainer, whose configuration errors may span lines,
// does not.
void SetLogEscapeControlCharacters(bool on);

enum class LineBreaks {
  kEscape,  // one line: "\n" and "\r" escaped (log lines, error messages, table cells)
  kKeep,    // many lines (a log's tail): '\n' kept; '\r' still escaped (it rewrites a line)
};

// `text` sanitised as described above.
std::string EscapeControlCharacters(std::string_view text,
                                    LineBreaks line_breaks = LineBreaks::kEscape);

// True when `text` is well-formed UTF-8 (what protobuf accepts in a `string` field).
bool IsValidUtf8(std::string_view text);
// The offset of the first byte of `text` that is not part of a well-formed UTF-8 sequence;
// std::string_view::npos when there is none.
size_t FirstInvalidUtf8(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that does not cut a well-formed
// UTF-8 sequence in two (for caps applied to sanitised text).
std::string_view Utf8Prefix(std::string_view text, size_t max_bytes);

}  // namespace ringmaster
