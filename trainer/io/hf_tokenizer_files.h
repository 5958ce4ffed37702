// The tokenizer files of a Hugging Face model directory. An export writes all four that
// transformers reads (vocab.txt, tokenizer_config.json, special_tokens_map.json and the fast
// tokenizer's tokenizer.json), so that AutoTokenizer and pipeline load the directory directly and
// truncate at the length the model was trained with. A directory that has tokenizer.json but no
// vocab.txt (many on the hub) is read from tokenizer.json. RoBERTa's byte-level BPE files
// (vocab.json + merges.txt) are recognised and read into a ByteBpeTokenizer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jobspec/job_settings.h"
#include "trainer/text/byte_bpe.h"

namespace ringmaster::trainer {

// A directory's WordPiece tokenizer, as the trainer's WordPieceTokenizer needs it.
struct HfTokenizerSource {
  // Set when the vocabulary is vocab.txt (read it with WordPieceTokenizer::FromVocabFile, whose
  // errors name its lines); empty when it came from tokenizer.json, then in `tokens`.
  std::string vocab_path;
  std::vector<std::string> tokens;  // by id; tokenizer.json only
  bool do_lower_case = true;
  // tokenizer_config.json's kTokenizerCompatKey: the HF tokenizer a ringmaster export was
  // trained to match; slow when absent (any other directory).
  jobspec::TokenizerCompat compat = jobspec::TokenizerCompat::kSlow;
  // tokenizer_config.json's model_max_length when it is an integer in [2, 2^31); 0 otherwise
  // (absent, or transformers' "no limit", 1e30).
  int model_max_length = 0;
  std::string source;  // the file the vocabulary came from, for messages
};

// The key of tokenizer_config.json that records model.tokenizer_compat ("slow" or "fast").
// transformers keeps keys it does not know among the tokenizer's init arguments and ignores them.
inline constexpr char kTokenizerCompatKey[] = "ringmaster_tokenizer_compat";

// Reads DIR's tokenizer: DIR/vocab.txt when present, with tokenizer_config.json's do_lower_case
// (true when absent); else DIR/tokenizer.json's WordPiece model ("model.vocab", ids 0..n-1 with
// no gap) and BertNormalizer ("lowercase"; "strip_accents" null or equal to it; and
// "handle_chinese_chars" true: the combinations BertTokenizer's do_lower_case gives, the only
// ones the trainer's tokenizer implements). Either way `compat` is tokenizer_config.json's
// kTokenizerCompatKey. Errors name the file and what is missing or unsupported (including a
// kTokenizerCompatKey that is not "slow" or "fast"). A directory without vocab.txt that has
// vocab.json + merges.txt (RoBERTa's layout) is an error saying it is a byte-level BPE tokenizer,
// which ReadHfByteBpeTokenizer reads.
absl::StatusOr<HfTokenizerSource> ReadHfTokenizer(const std::string& dir);

// A directory's byte-level BPE tokenizer (RoBERTa's and GPT-2's layout), for ByteBpeTokenizer.
struct HfByteBpeTokenizer {
  ByteBpeTokenizer tokenizer;
  // tokenizer_config.json's model_max_length, as in HfTokenizerSource.
  int model_max_length = 0;
  std::string source;  // the file(s) the vocabulary came from, for messages
};

// True when DIR has no vocab.txt but vocab.json and merges.txt: a RoBERTa-style directory.
bool HasHfByteBpeFiles(const std::string& dir);

// Reads DIR's byte-level BPE tokenizer: DIR/vocab.json + DIR/merges.txt, else DIR/tokenizer.json's
// BPE model; add_prefix_space from tokenizer_config.json (false when absent, as RobertaTokenizer's
// default), compat from its kTokenizerCompatKey unless `compat` is given. Errors name the file.
absl::StatusOr<HfByteBpeTokenizer> ReadHfByteBpeTokenizer(
    const std::string& dir, std::optional<jobspec::TokenizerCompat> compat = std::nullopt);

// The files an export writes beside vocab.txt. `vocab` is by id; `model_max_length` is the
// length the model was trained with ([CLS] and [SEP] included), which transformers truncates at.
std::string TokenizerConfigJson(bool do_lower_case, int model_max_length,
                                jobspec::TokenizerCompat compat);
std::string SpecialTokensMapJson();
// The fast tokenizer's tokenizer.json: WordPiece over `vocab` (a token listed twice keeps its
// later id, as vocab.txt's reader does), BertNormalizer, BertPreTokenizer, the [CLS] $A [SEP]
// (pair: [CLS] $A [SEP] $B [SEP]) template and the WordPiece decoder; truncation and padding
// unset (transformers sets them per call from model_max_length).
std::string TokenizerJson(const std::vector<std::string>& vocab, bool do_lower_case);

}  // namespace ringmaster::trainer
