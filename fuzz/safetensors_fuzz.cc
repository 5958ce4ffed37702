// Fuzzes the safetensors reader (trainer/io/safetensors): the 8-byte header length, the JSON
// header and the offset checks. The input is a whole file. Properties: any input is either
// refused with a Status or yields tensors whose byte ranges lie inside the input and tile the
// data buffer; every float tensor converts without reading out of bounds.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "trainer/io/safetensors.h"

namespace rt = ringmaster::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = rt::SafetensorsReader::FromBuffer(data, size, "fuzz.safetensors");
  if (!reader.ok()) return 0;
  const rt::SafetensorsReader& r = **reader;
  size_t covered = 0;
  for (const rt::TensorInfo& t : r.tensors()) {
    FUZZ_CHECK(r.Find(t.name) == &t, "Find returns the listed tensor");
    FUZZ_CHECK(t.begin <= t.end, "begin <= end");
    const uint8_t* p = r.data(t);
    FUZZ_CHECK(p >= data && p + (t.end - t.begin) <= data + size, "tensor inside the input");
    FUZZ_CHECK(t.numel() * rt::DTypeSize(t.dtype) == t.end - t.begin, "shape matches the bytes");
    covered += t.end - t.begin;
    // Convert small float tensors (ASan checks every byte read); large ones only cost time.
    if (t.numel() <= (size_t{1} << 16)) {
      std::vector<float> out(t.numel());
      const absl::Status s = r.ReadFloat(t, out.data(), out.size());
      const bool is_float = t.dtype == rt::DType::kF32 || t.dtype == rt::DType::kF16 ||
                            t.dtype == rt::DType::kBF16 || t.dtype == rt::DType::kF64;
      FUZZ_CHECK(s.ok() == is_float, "ReadFloat accepts exactly the float dtypes");
    }
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  FUZZ_CHECK(covered == size - 8 - header_len, "tensors tile the data buffer");
  return 0;
}
