// Control characters in log lines and terminal output (issue #20). Text from the network (node
// and job names, request ids, errors) must not end a line early and forge the next one.
#pragma once

#include <string>
#include <string_view>

namespace ringmaster {

// From now on, control characters (bytes below 0x20 but tab, and 0x7f) in a logged message
// (common/log.h) are written as "\n", "\r" or "\xNN". The coordinator and the agent turn it on;
// the trainer, whose configuration errors may span lines, does not.
void SetLogEscapeControlCharacters(bool on);

// `text` with its control characters escaped as above (for terminal output too).
std::string EscapeControlCharacters(std::string_view text);

}  // namespace ringmaster
