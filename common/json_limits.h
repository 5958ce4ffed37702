// JSON from outside the process (model files, data lines, manifests) read with limits (issue #31,
// finding 4). nlohmann's parser is iterative, but copying, comparing and dump() of a value
// recurse once per nesting level: 300,000 levels of '[' parse fine and then crash the process
// (SIGSEGV) in the first error message that prints the value. So:
//  - ParseJsonLimited refuses text nested deeper than kMaxJsonDepth before parsing it, with
//    InvalidArgument naming `what` and the byte offset;
//  - JsonExcerpt prints a value for an error message without recursing: a scalar as JSON
//    (ASCII only, control characters and invalid UTF-8 escaped), cut to a bounded length; an
//    array or object as its kind and size.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ringmaster {

// Deeper than any file the project reads (a safetensors header or tokenizer.json nests 4 levels).
inline constexpr int kMaxJsonDepth = 64;
// The most bytes of a value JsonExcerpt prints.
inline constexpr size_t kMaxJsonExcerptBytes = 80;

// OK when no array or object in `text` lies more than `max_depth` levels deep (strings skipped,
// escapes honoured); else InvalidArgument "WHAT: JSON nested deeper than N levels (at byte K)".
// Linear, no allocation: run before parsing.
absl::Status CheckJsonDepth(std::string_view text, const std::string& what,
                            int max_depth = kMaxJsonDepth);

// `text` parsed as JSON after CheckJsonDepth; a syntax error is InvalidArgument naming `what`
// and nlohmann's position message. Json is nlohmann::json or nlohmann::ordered_json.
template <typename Json = nlohmann::json>
absl::StatusOr<Json> ParseJsonLimited(std::string_view text, const std::string& what,
                                      int max_depth = kMaxJsonDepth) {
  if (absl::Status s = CheckJsonDepth(text, what, max_depth); !s.ok()) return s;
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON"));
  return j;
}

// For an error message: see the top of this file. Never recurses into arrays or objects.
template <typename Json>
std::string JsonExcerpt(const Json& j) {
  if (j.is_array()) return absl::StrCat("a list of ", j.size());
  if (j.is_object()) return absl::StrCat("an object of ", j.size(), " keys");
  std::string s;
  if (j.is_string()) {
    const std::string& v = j.template get_ref<const std::string&>();
    if (v.size() > kMaxJsonExcerptBytes) {
      // Cut first (dump would copy all of it); a cut UTF-8 sequence is replaced below.
      s = Json(v.substr(0, kMaxJsonExcerptBytes))
              .dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
      s.insert(s.size() - 1, "...");
      return s;
    }
  }
  s = j.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace);
  if (s.size() > kMaxJsonExcerptBytes + 8)
    s = absl::StrCat(s.substr(0, kMaxJsonExcerptBytes), "...");
  return s;
}

}  // namespace ringmaster
