#include "trainer/data/tsv_row_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "trainer/data/tsv.h"

namespace ringmaster::trainer {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;
// More words than the longest data.max_seq_len (8192 tokens, jobspec's limit) can hold: such a
// row is truncated whatever the job says, most of it never read (a 5 MB line, often a file whose
// line ends were lost). Issue #32: said once, with its line, instead of nothing.
constexpr uint32_t kOverLongRowWords = 8192;

// Closes a descriptor on every early return of Build.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<TsvRowIndex> TsvRowIndex::Build(const std::string& path, int num_labels,
                                               const TableOptions& options) {
  RM_ASSIGN_OR_RETURN(TsvLineParser parser, TsvLineParser::ForTraining(path, num_labels, options));
  // The same checks, and messages, as ReadFile's (a FIFO or device is refused, not waited on).
  RM_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path));
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoError("cannot stat", path);
  if (static_cast<uint64_t>(st.st_size) > kMaxTsvBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file is ", st.st_size, " bytes, over the limit of ", kMaxTsvBytes));
  }

  TsvRowIndex index;
  index.path_ = path;
  std::optional<TsvLineParser::Row> row;
  uint64_t record_start = 0;  // file offset of the record the next line belongs to
  bool warned_long = false;   // the first over-long row is reported, the others counted
  // A TSV row's sentence starts at line_start + sentence_begin; other formats' rows are whole
  // records (a CSV record may span lines). Labels are parsed here, once.
  auto feed = [&](absl::string_view line, uint64_t line_start) -> absl::Status {
    if (!parser.in_record()) record_start = line_start;
    RM_RETURN_IF_ERROR(parser.Feed(line, &row));
    if (!row) return absl::OkStatus();
    if (parser.text_is_span()) {
      index.offsets_.push_back(line_start + row->sentence_begin);
      index.text_bytes_.push_back(static_cast<uint32_t>(row->sentence_size));
      index.words_.push_back(
          CountWords(std::string_view(line.data() + row->sentence_begin, row->sentence_size)));
    } else {
      const uint64_t size = line_start + line.size() - record_start;
      if (size > UINT32_MAX) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ":", parser.line_no(), ": a record of ", size, " bytes (4 GiB at most)"));
      }
      index.offsets_.push_back(record_start);
      index.text_bytes_.push_back(static_cast<uint32_t>(size));
      index.words_.push_back(CountWords(row->text) + CountWords(row->text_pair));
    }
    index.labels_.push_back(row->label);
    if (!warned_long && index.words_.back() > kOverLongRowWords) {
      warned_long = true;
      LogWarning(absl::StrCat(
          path, ":", parser.line_no(), ": a row of ", index.text_bytes_.back(), " bytes and ",
          index.words_.back(), " words, more than any data.max_seq_len (", kOverLongRowWords,
          " tokens at most) holds: only its first data.max_seq_len tokens are used (further rows "
          "this long are not reported)"));
    }
    return absl::OkStatus();
  };

  std::string buf;         // the unfinished line, then the chunk read after it
  uint64_t buf_start = 0;  // file offset of buf[0]
  uint64_t total = 0;      // bytes read so far
  std::string chunk(kChunkBytes, '\0');
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read", path);
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > kMaxTsvBytes) {  // the file grew after fstat
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": file is over the limit of ", kMaxTsvBytes, " bytes"));
    }
    size_t search = buf.size();  // the unfinished line has no '\n': look in the new bytes only
    buf.append(chunk.data(), static_cast<size_t>(n));
    size_t pos = 0;
    for (size_t nl; (nl = buf.find('\n', search)) != std::string::npos; pos = search = nl + 1) {
      RM_RETURN_IF_ERROR(feed(absl::string_view(buf).substr(pos, nl - pos), buf_start + pos));
    }
    buf.erase(0, pos);
    buf_start += pos;
  }
  if (!buf.empty()) RM_RETURN_IF_ERROR(feed(buf, buf_start));
  RM_RETURN_IF_ERROR(parser.Finish());
  for (float& label : index.labels_) label = parser.FinalLabel(label);
  index.label_names_ = parser.label_names();
  index.has_pairs_ = parser.has_pairs();
  if (!parser.text_is_span()) index.decoder_ = std::make_unique<TsvLineParser>(std::move(parser));
  index.offsets_.shrink_to_fit();
  index.text_bytes_.shrink_to_fit();
  index.words_.shrink_to_fit();
  index.labels_.shrink_to_fit();
  index.fd_ = closer.release();
  return index;
}

TsvRowIndex::TsvRowIndex(TsvRowIndex&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      decoder_(std::move(other.decoder_)),
      offsets_(std::move(other.offsets_)),
      text_bytes_(std::move(other.text_bytes_)),
      words_(std::move(other.words_)),
      labels_(std::move(other.labels_)),
      has_pairs_(other.has_pairs_),
      label_names_(std::move(other.label_names_)) {}

TsvRowIndex& TsvRowIndex::operator=(TsvRowIndex&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    decoder_ = std::move(other.decoder_);
    offsets_ = std::move(other.offsets_);
    text_bytes_ = std::move(other.text_bytes_);
    words_ = std::move(other.words_);
    labels_ = std::move(other.labels_);
    has_pairs_ = other.has_pairs_;
    label_names_ = std::move(other.label_names_);
  }
  return *this;
}

TsvRowIndex::~TsvRowIndex() {
  if (fd_ >= 0) ::close(fd_);
}

size_t TsvRowIndex::memory_bytes() const {
  return offsets_.capacity() * sizeof(uint64_t) + text_bytes_.capacity() * sizeof(uint32_t) +
         words_.capacity() * sizeof(uint32_t) + labels_.capacity() * sizeof(float);
}

std::vector<uint32_t> TsvRowIndex::LengthKeys(int max_len) const {
  std::vector<uint32_t> keys(words_.size());
  const uint32_t specials = has_pairs_ ? 3 : 2;  // [CLS] [SEP] (and a second [SEP])
  const uint32_t cap = static_cast<uint32_t>(std::max<int>(max_len, specials));
  for (size_t i = 0; i < words_.size(); ++i) keys[i] = std::min(words_[i] + specials, cap);
  return keys;
}

namespace {

enum CharClass : uint8_t { kWordChar, kSpace, kAlone };

// ASCII classes, computed once: whitespace, punctuation (a word of its own), the rest.
struct AsciiClasses {
  CharClass c[128];
  AsciiClasses() {
    for (int i = 0; i < 128; ++i) {
      c[i] = (i == ' ' || i == '\t' || i == '\n' || i == '\r') ? kSpace
             : std::ispunct(i)                                 ? kAlone
                                                               : kWordChar;
    }
  }
};

CharClass ClassOf(uint32_t cp) {
  if (cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x3000) return kSpace;
  if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
      (cp >= 0x20000 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
      (cp >= 0x2F800 && cp <= 0x2FA1F)) {
    return kAlone;  // CJK ideographs
  }
  return kWordChar;
}

}  // namespace

uint32_t CountWords(std::string_view text) {
  static const AsciiClasses kAscii;
  uint32_t words = 0;
  bool in_word = false;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    CharClass cls;
    if (b < 0x80) {
      cls = kAscii.c[b];
      ++i;
    } else {
      // One UTF-8 code point (a malformed byte counts as a one-byte word character).
      uint32_t cp = b;
      size_t len = 1;
      if (b >= 0xF0 && i + 3 < text.size()) {
        cp = (b & 0x07u) << 18 | (text[i + 1] & 0x3Fu) << 12 | (text[i + 2] & 0x3Fu) << 6 |
             (text[i + 3] & 0x3Fu);
        len = 4;
      } else if (b >= 0xE0 && i + 2 < text.size()) {
        cp = (b & 0x0Fu) << 12 | (text[i + 1] & 0x3Fu) << 6 | (text[i + 2] & 0x3Fu);
        len = 3;
      } else if (b >= 0xC0 && i + 1 < text.size()) {
        cp = (b & 0x1Fu) << 6 | (text[i + 1] & 0x3Fu);
        len = 2;
      }
      i += len;
      cls = ClassOf(cp);
    }
    if (cls == kSpace) {
      in_word = false;
    } else if (cls == kAlone) {
      ++words;
      in_word = false;
    } else if (!in_word) {
      ++words;
      in_word = true;
    }
  }
  return words;
}

absl::StatusOr<std::string> TsvRowIndex::ReadText(int64_t row) const {
  RM_ASSIGN_OR_RETURN(RowText t, ReadRow(row));
  return std::move(t.text);
}

absl::StatusOr<RowText> TsvRowIndex::ReadRow(int64_t row) const {
  if (row < 0 || static_cast<size_t>(row) >= size()) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": row ", row, " is out of range (", size(), " rows)"));
  }
  std::string text(text_bytes_[row], '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd_, text.data() + done, text.size() - done,
                              static_cast<off_t>(offsets_[row] + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot read", path_);
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(path_, ": file is shorter than when it was indexed",
                                              " (data row ", row + 1, ")"));
    }
    done += static_cast<size_t>(n);
  }
  if (decoder_ != nullptr) return decoder_->TextOfRecord(text);
  return RowText{std::move(text), ""};
}

absl::StatusOr<Batch> MakeIndexedBatch(
    const TsvRowIndex& index, const std::vector<int64_t>& rows,
    const std::function<std::vector<int32_t>(std::string_view)>& encode, int32_t pad_id) {
  std::vector<EncodedExample> encoded(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    RM_ASSIGN_OR_RETURN(std::string text, index.ReadText(rows[i]));
    encoded[i].ids = encode(text);
    encoded[i].label = index.label(rows[i]);
  }
  return MakeBatchFromRows(encoded, rows, pad_id);
}

absl::StatusOr<Batch> MakeIndexedBatch(const TsvRowIndex& index, const std::vector<int64_t>& rows,
                                       const PairEncoder& encode, int32_t pad_id) {
  std::vector<EncodedExample> encoded(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    RM_ASSIGN_OR_RETURN(RowText text, index.ReadRow(rows[i]));
    encoded[i].ids = encode(text.text, text.text_pair, &encoded[i].type_ids);
    encoded[i].label = index.label(rows[i]);
  }
  return MakeBatchFromRows(encoded, rows, pad_id);
}

}  // namespace ringmaster::trainer
