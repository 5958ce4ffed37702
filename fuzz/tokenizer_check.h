// Properties every WordPiece tokenization must have, shared by the vocab and tokenizer targets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "trainer/text/wordpiece.h"

namespace ringmaster::fuzz {

// Ids in range and agreeing with the string pieces; Encode is [CLS] pieces [SEP], cut to max_len.
inline void CheckTokenization(const trainer::WordPieceTokenizer& tok, std::string_view text,
                              int max_len) {
  const std::vector<std::string> pieces = tok.Tokenize(text);
  const std::vector<int32_t> ids = tok.TokenizeToIds(text);
  FUZZ_CHECK(pieces.size() == ids.size(), "Tokenize and TokenizeToIds agree on the count");
  for (size_t i = 0; i < ids.size(); ++i) {
    FUZZ_CHECK(ids[i] >= 0 && ids[i] < tok.vocab_size(), "ids are in the vocab");
    FUZZ_CHECK(tok.TokenId(pieces[i]) == ids[i], "pieces and ids agree");
  }
  const std::vector<int32_t> encoded = tok.Encode(text, max_len);
  FUZZ_CHECK(encoded.size() >= 2 && encoded.size() <= static_cast<size_t>(max_len),
             "Encode fits max_len");
  FUZZ_CHECK(encoded.front() == tok.special().cls && encoded.back() == tok.special().sep,
             "Encode is [CLS] ... [SEP]");
  for (size_t i = 1; i + 1 < encoded.size(); ++i) {
    FUZZ_CHECK(encoded[i] == ids[i - 1], "Encode keeps the first pieces");
  }
}

}  // namespace ringmaster::fuzz
