#include "trainer/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json_limits.h"
#include "common/open_beneath.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {

// The format is little-endian on disk; we read and write the mapping directly.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little endian");

namespace {

absl::string_view AbslName(DType d) {
  const std::string_view n = DTypeName(d);
  return absl::string_view(n.data(), n.size());
}

// The reference implementation's limit; a larger header is treated as corrupt/hostile.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

constexpr DType kAllDTypes[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                                DType::kI32, DType::kI16, DType::kI8,  DType::kU8,   DType::kBool};

bool ParseDType(const std::string& s, DType* out) {
  for (DType d : kAllDTypes) {
    if (DTypeName(d) == s) {
      *out = d;
      return true;
    }
  }
  return false;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// numel * elem_size with overflow detection (a hostile header can claim any shape).
bool ShapeBytes(const std::vector<int64_t>& shape, size_t elem_size, uint64_t* out) {
  uint64_t n = elem_size;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exactly representable in float.
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / nan
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// absl::string_view, not std::string_view: this absl is built without the std alias.
absl::Status Corrupt(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

// Parses one tensor entry of the header into `t` (name already set).
absl::Status ParseTensorEntry(const std::string& path, const nlohmann::ordered_json& v,
                              TensorInfo* t) {
  const std::string where = absl::StrCat("tensor '", t->name, "'");
  if (!v.is_object()) return Corrupt(path, absl::StrCat(where, " entry is not an object"));
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(field)) {
      return Corrupt(path, absl::StrCat(where, " is missing '", field, "'"));
    }
  }
  const nlohmann::ordered_json& dtype = v["dtype"];
  if (!dtype.is_string()) return Corrupt(path, absl::StrCat(where, " 'dtype' is not a string"));
  const std::string dtype_name = dtype.get<std::string>();
  if (!ParseDType(dtype_name, &t->dtype)) {
    return Corrupt(path, absl::StrCat(where, " has unknown dtype '", dtype_name, "'"));
  }
  const nlohmann::ordered_json& shape = v["shape"];
  if (!shape.is_array()) return Corrupt(path, absl::StrCat(where, " 'shape' is not an array"));
  for (const nlohmann::ordered_json& d : shape) {
    if (!d.is_number_integer()) {
      return Corrupt(path,
                     absl::StrCat(where, " 'shape' has a non-integer entry ", JsonExcerpt(d)));
    }
    if (d.is_number_unsigned() &&
        d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Corrupt(path, absl::StrCat(where, " 'shape' entry ", JsonExcerpt(d), " is too large"));
    }
    const int64_t dim = d.get<int64_t>();
    if (dim < 0) {
      return Corrupt(path, absl::StrCat(where, " has a negative dimension ", dim, " in shape"));
    }
    t->shape.push_back(dim);
  }
  const nlohmann::ordered_json& offs = v["data_offsets"];
  if (!offs.is_array() || offs.size() != 2) {
    return Corrupt(path, absl::StrCat(where, " 'data_offsets' is not an array of two integers"));
  }
  for (const nlohmann::ordered_json& o : offs) {
    if (!o.is_number_integer()) {
      return Corrupt(
          path, absl::StrCat(where, " 'data_offsets' has a non-integer entry ", JsonExcerpt(o)));
    }
    if (!o.is_number_unsigned()) {
      return Corrupt(path,
                     absl::StrCat(where, " 'data_offsets' has a negative entry ", JsonExcerpt(o)));
    }
  }
  const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
  if (begin > end) {
    return Corrupt(path,
                   absl::StrCat(where, " data_offsets [", begin, ", ", end, ") has begin > end"));
  }
  uint64_t nbytes = 0;
  if (!ShapeBytes(t->shape, DTypeSize(t->dtype), &nbytes)) {
    return Corrupt(path, absl::StrCat(where, " shape ", ShapeString(t->shape), " overflows"));
  }
  if (nbytes != end - begin) {
    return Corrupt(path, absl::StrCat(where, " shape ", ShapeString(t->shape), " of ", dtype_name,
                                      " needs ", nbytes, " bytes but data_offsets [", begin, ", ",
                                      end, ") span ", end - begin));
  }
  t->begin = static_cast<size_t>(begin);
  t->end = static_cast<size_t>(end);
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB per call; loop on short writes.
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("cannot write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return "F64";
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI16:
      return "I16";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

size_t TensorInfo::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(
    const std::string& path) {
  // Refuses a FIFO or device without blocking on it (a plain open() of a FIFO waits for a writer).
  absl::StatusOr<int> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  return OpenFd(*opened, path);
}

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::OpenFd(
    int fd, const std::string& path) {
  std::unique_ptr<SafetensorsReader> r(new SafetensorsReader());
  r->path_ = path;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("cannot stat", path);
    ::close(fd);
    return s;
  }
  const size_t file_size = static_cast<size_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return Corrupt(path, absl::StrCat("truncated: file is ", file_size,
                                      " bytes, shorter than the 8-byte header length"));
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    absl::Status s = ErrnoError("cannot mmap", path);
    ::close(fd);
    return s;
  }
  ::close(fd);  // the mapping keeps the file alive
  r->map_ = map;
  r->map_size_ = file_size;
  RM_RETURN_IF_ERROR(r->Parse(static_cast<const uint8_t*>(map), file_size));
  return r;
}

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::FromBuffer(
    const uint8_t* bytes, size_t size, std::string name) {
  std::unique_ptr<SafetensorsReader> r(new SafetensorsReader());
  r->path_ = std::move(name);
  if (size < 8) {
    return Corrupt(r->path_, absl::StrCat("truncated: buffer is ", size,
                                          " bytes, shorter than the 8-byte header length"));
  }
  RM_RETURN_IF_ERROR(r->Parse(bytes, size));
  return r;
}

absl::Status SafetensorsReader::Parse(const uint8_t* base, size_t file_size) {
  const std::string& path = path_;
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  if (header_len == 0) return Corrupt(path, "header length is 0");
  if (header_len > kMaxHeaderSize) {
    return Corrupt(path, absl::StrCat("header length ", header_len, " exceeds the limit of ",
                                      kMaxHeaderSize, " bytes"));
  }
  if (header_len > file_size - 8) {
    return Corrupt(path, absl::StrCat("truncated: header length ", header_len,
                                      " exceeds the file size ", file_size, " - 8"));
  }
  const char* hbegin = reinterpret_cast<const char*>(base + 8);
  const char* hend = hbegin + header_len;
  data_ = base + 8 + header_len;
  const size_t data_size = file_size - 8 - header_len;

  // nlohmann keeps the last of duplicate keys silently; a parser callback sees every key, so a
  // per-object key set catches duplicates (a tensor listed twice would otherwise be hidden).
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  // ordered_json keeps the header's key order, which tensors() reports.
  using Json = nlohmann::ordered_json;
  Json::parser_callback_t on_event = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start) {
      open_objects.emplace_back();
    } else if (event == E::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == E::key && !open_objects.empty()) {
      std::string k = parsed.get<std::string>();
      if (!open_objects.back().insert(k).second && duplicate.empty()) duplicate = std::move(k);
    }
    return true;
  };
  Json header;
  if (absl::Status s = CheckJsonDepth(std::string_view(hbegin, header_len), "header"); !s.ok()) {
    return Corrupt(path, s.message());
  }
  try {
    header = Json::parse(hbegin, hend, on_event);
  } catch (const Json::exception& e) {
    return Corrupt(path, absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return Corrupt(path, absl::StrCat("header has duplicate key '", duplicate, "'"));
  }
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return Corrupt(path, "'__metadata__' is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return Corrupt(path,
                         absl::StrCat("'__metadata__' value for '", m.key(), "' is not a string"));
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    TensorInfo t;
    t.name = it.key();
    RM_RETURN_IF_ERROR(ParseTensorEntry(path, it.value(), &t));
    tensors_.push_back(std::move(t));
  }
  // As the reference does: sorted by offsets, the ranges must tile the buffer exactly, with no
  // gap, no overlap and nothing after the last tensor.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorInfo* a, const TensorInfo* b) {
                     return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
                   });
  size_t expected = 0;
  for (const TensorInfo* tp : by_offset) {
    const TensorInfo& t = *tp;
    if (t.begin != expected) {
      if (t.begin > data_size || t.end > data_size) {
        return Corrupt(path, absl::StrCat("tensor '", t.name, "' data_offsets [", t.begin, ", ",
                                          t.end, ") out of range (data is ", data_size, " bytes)"));
      }
      return Corrupt(
          path, absl::StrCat("tensor '", t.name, "' data_offsets [", t.begin, ", ", t.end, ") ",
                             t.begin < expected ? "overlap the previous tensor"
                                                : "leave a gap after the previous tensor",
                             " (which ends at ", expected, ")"));
    }
    if (t.end > data_size) {
      return Corrupt(path, absl::StrCat("tensor '", t.name, "' data_offsets [", t.begin, ", ",
                                        t.end, ") out of range (data is ", data_size, " bytes)"));
    }
    expected = t.end;
  }
  if (expected != data_size) {
    return Corrupt(path, absl::StrCat("data is ", data_size, " bytes but the tensors cover only ",
                                      expected, " (trailing bytes not indexed by the header)"));
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return absl::OkStatus();
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept {
  *this = std::move(other);
}

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsReader::~SafetensorsReader() { Unmap(); }

void SafetensorsReader::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
}

const TensorInfo* SafetensorsReader::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status SafetensorsReader::ReadFloat(const TensorInfo& t, float* out, size_t out_numel) const {
  const size_t n = t.numel();
  if (out_numel != n) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", t.name, "' has ", n,
                                                   " elements, the destination holds ", out_numel));
  }
  // Data need not be aligned (the header length is arbitrary), so elements are memcpy'd.
  const uint8_t* p = data(t);
  switch (t.dtype) {
    case DType::kF32:
      // An empty tensor may come with out == nullptr (an empty vector's data()), and memcpy
      // with a null pointer is undefined even for 0 bytes (found by safetensors_fuzz).
      if (n > 0) std::memcpy(out, p, n * sizeof(float));
      return absl::OkStatus();
    case DType::kF64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, p + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      return absl::OkStatus();
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        out[i] = HalfToFloat(h);
      }
      return absl::OkStatus();
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(path_, ": tensor '", t.name, "' has dtype ",
                                                     AbslName(t.dtype),
                                                     ", expected a float type (F32/F16/BF16/F64)"));
  }
}

absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::string& root) {
  // ordered_json keeps insertion order, so the header lists tensors in data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name '__metadata__' is reserved"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": duplicate tensor name '", t.name, "'"));
    }
    uint64_t nbytes = 0;
    if (!ShapeBytes(t.shape, DTypeSize(t.dtype), &nbytes)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", t.name, "' shape ",
                                                     ShapeString(t.shape),
                                                     " has a negative dimension or overflows"));
    }
    if (nbytes != t.nbytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "' shape ", ShapeString(t.shape), " of ",
                       AbslName(t.dtype), " needs ", nbytes, " bytes, got ", t.nbytes));
    }
    if (t.nbytes > 0 && t.data == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "' has no data pointer"));
    }
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = std::string(DTypeName(t.dtype));
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + nbytes};
    header[t.name] = std::move(e);
    offset += nbytes;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    // Names or metadata that are not valid UTF-8.
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot encode header: ", e.what()));
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_len = header_text.size();

  // The directory is opened once and everything below happens relative to it (a pinned root's
  // handle under `root`: issue #31).
  std::string name;
  RM_ASSIGN_OR_RETURN(const int dirfd, OpenParentBeneath(root, path, &name));
  if (absl::Status s = CheckReplaceableByRename(dirfd, name, path); !s.ok()) {
    ::close(dirfd);
    return s;
  }
  const std::string tmp_name = absl::StrCat(name, ".tmp.", ::getpid());
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  // O_NOFOLLOW: a link planted under the temporary name is not written through (issue #20).
  const int fd = ::openat(dirfd, tmp_name.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    absl::Status s = ErrnoError("cannot create", tmp);
    ::close(dirfd);
    return s;
  }
  absl::Status s = WriteAll(fd, &header_len, 8, tmp);
  if (s.ok()) s = WriteAll(fd, header_text.data(), header_text.size(), tmp);
  for (size_t i = 0; s.ok() && i < tensors.size(); ++i) {
    s = WriteAll(fd, tensors[i].data, tensors[i].nbytes, tmp);
  }
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoError("cannot fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("cannot close", tmp);
  // renameat replaces the entry `name` itself, never a file a link there points to.
  if (s.ok() && ::renameat(dirfd, tmp_name.c_str(), dirfd, name.c_str()) != 0) {
    s = ErrnoError("cannot rename into", path);
  }
  if (!s.ok()) ::unlinkat(dirfd, tmp_name.c_str(), 0);
  if (s.ok() && ::fsync(dirfd) != 0) s = ErrnoError("cannot fsync the directory of", path);
  ::close(dirfd);
  return s;
}

}  // namespace ringmaster::trainer
