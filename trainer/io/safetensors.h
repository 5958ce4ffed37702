// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
// 8-byte little-endian header length N, N bytes of JSON header, then the tensor byte buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::trainer {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// Bytes per element.
size_t DTypeSize(DType dtype);
// The format's spelling: "F32", "BF16", "BOOL", ...
std::string_view DTypeName(DType dtype);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  size_t begin = 0, end = 0;  // byte offsets relative to the start of the data buffer

  size_t numel() const;
};

// A memory-mapped safetensors file (PROT_READ, MAP_PRIVATE), unmapped in the destructor. The
// header is fully validated by Open, so data() of any listed tensor is in bounds.
class SafetensorsReader {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> Open(const std::string& path);
  // The same on a regular file the caller opened (read_beneath.h, say); this call closes `fd`.
  // `path` names it in errors and path().
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> OpenFd(int fd, const std::string& path);
  // The same checks on `size` bytes already in memory, which the caller keeps alive and
  // unchanged for the reader's lifetime (the reader does not copy them). `name` stands for the
  // path in errors and path().
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> FromBuffer(const uint8_t* bytes,
                                                                       size_t size,
                                                                       std::string name);

  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&& other) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  ~SafetensorsReader();

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in header order
  const TensorInfo* Find(std::string_view name) const;                 // nullptr when absent
  const uint8_t* data(const TensorInfo& t) const { return data_ + t.begin; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

  // Converts an F32/F16/BF16/F64 tensor to float into `out`, which must hold numel floats;
  // other dtypes are an error naming the tensor and the file.
  absl::Status ReadFloat(const TensorInfo& t, float* out, size_t out_numel) const;

 private:
  SafetensorsReader() = default;
  void Unmap();
  // Validates the header of the `size` bytes at `base` and fills tensors_, index_, metadata_
  // and data_; errors name path_.
  absl::Status Parse(const uint8_t* base, size_t size);

  std::string path_;
  void* map_ = nullptr;  // null for FromBuffer
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the byte buffer, inside the mapping
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes atomically (temp file in the same directory, fsync, rename, fsync the directory). The
// header JSON is padded with spaces to a multiple of 8 bytes, as the reference implementation
// does, so that the data buffer is 8-byte aligned in the file. Tensors are laid out in the
// given order. Errors on duplicate names, the reserved name "__metadata__", negative dims, and
// nbytes != numel * dtype size. With a non-empty `root` (which `path` lies below), the directory
// is reached through OpenParentBeneath (open_beneath.h: no link followed, a pinned root's
// handle) and the file created and renamed relative to it.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              const std::string& root = "");

}  // namespace ringmaster::trainer
