// The last check before a message leaves the agent (issue #31): protobuf `string` fields must be
// well-formed UTF-8, and the coordinator drops a stream whose message breaks that rule. A trainer
// error quoting a raw byte of a hostile model file (`\xff\xfe{` as config.json) once made every
// report fail that way: the agent re-registered ~390 times a second and its job never ended.
#pragma once

#include <cstddef>

#include "google/protobuf/message.h"

namespace ringmaster::agent {

// Rewrites every `string` field of `msg` (nested and repeated messages included; `bytes` fields
// are left alone) that is not well-formed UTF-8 or holds a control character, through
// EscapeControlCharacters (common/log_escape.h). Returns how many fields it rewrote.
size_t SanitizeStringFields(google::protobuf::Message* msg);

}  // namespace ringmaster::agent
