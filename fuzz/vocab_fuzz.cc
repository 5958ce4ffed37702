// Fuzzes vocab.txt reading (WordPieceTokenizer::FromVocabText, what FromVocabFile runs on the
// file's bytes). The first byte's low bit picks cased/uncased, the rest is the file. A vocab
// that loads then tokenizes a fixed text and its own file content, which must give in-range ids
// that agree with the pieces.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "fuzz/tokenizer_check.h"

namespace rt = ringmaster::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool lower = (data[0] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<rt::WordPieceTokenizer> tok =
      rt::WordPieceTokenizer::FromVocabText(text, lower, "vocab.txt");
  if (!tok.ok()) return 0;
  FUZZ_CHECK(tok->vocab_size() > 0, "a loaded vocab is not empty");
  ringmaster::fuzz::CheckTokenization(*tok, "Hello, [MASK] wörld! 日本語 unaffable", 16);
  ringmaster::fuzz::CheckTokenization(*tok, text, 2 + (data[0] >> 1));
  return 0;
}
