#include "agent/wire_text.h"

#include <string>
#include <vector>

#include "common/log_escape.h"
#include "google/protobuf/descriptor.h"

namespace ringmaster::agent {
namespace {

using google::protobuf::FieldDescriptor;

// Printable ASCII (and tab) needs no rewriting: the common case, checked without allocating.
bool PlainAscii(const std::string& s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u >= 0x7f) return false;
  }
  return true;
}

// The sanitised text when it differs from `s`.
bool Rewrite(const std::string& s, std::string* out) {
  if (PlainAscii(s)) return false;
  *out = EscapeControlCharacters(s);
  return *out != s;
}

}  // namespace

size_t SanitizeStringFields(google::protobuf::Message* msg) {
  const google::protobuf::Reflection* r = msg->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*msg, &fields);
  size_t changed = 0;
  std::string clean;
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*msg, f); ++i) {
          if (Rewrite(r->GetRepeatedString(*msg, f, i), &clean)) {
            r->SetRepeatedString(msg, f, i, clean);
            ++changed;
          }
        }
      } else if (Rewrite(r->GetString(*msg, f), &clean)) {
        r->SetString(msg, f, clean);
        ++changed;
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      // Map entries are messages too: their keys and values are covered.
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*msg, f); ++i) {
          changed += SanitizeStringFields(r->MutableRepeatedMessage(msg, f, i));
        }
      } else {
        changed += SanitizeStringFields(r->MutableMessage(msg, f));
      }
    }
  }
  return changed;
}

}  // namespace ringmaster::agent
