#include "trainer/io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace ringmaster::trainer {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("safetensors_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // A file with the given header text and `data_bytes` zero bytes after it; `header_len`
  // overrides the length prefix.
  std::string RawFile(const std::string& name, const std::string& header, size_t data_bytes,
                      int64_t header_len = -1) const {
    std::string bytes(8, '\0');
    const uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    std::memcpy(bytes.data(), &n, 8);
    bytes += header;
    bytes.append(data_bytes, '\0');
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  fs::path dir_;
};

TEST(DType, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI8), 1u);
  EXPECT_EQ(DTypeSize(DType::kU8), 1u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeName(DType::kF32), "F32");
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeName(DType::kBool), "BOOL");
  EXPECT_EQ(DTypeName(DType::kU8), "U8");
}

TEST_F(SafetensorsTest, RoundTrip) {
  std::vector<float> a(12);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f * i - 3.0f;
  const std::vector<int64_t> b = {-2, -1, 0, 1, 2};
  const std::vector<uint8_t> c = {1, 0, 1};
  const std::vector<double> d = {1e-300, -2.5};
  const std::string path = Path("x.safetensors");
  // Names deliberately not in alphabetical order: tensors() must follow the header.
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"zeta", DType::kF32, {3, 4}, a.data(), a.size() * 4},
                                {"alpha", DType::kI64, {5}, b.data(), b.size() * 8},
                                {"empty", DType::kF32, {0, 7}, nullptr, 0},
                                {"mid", DType::kBool, {3}, c.data(), 3},
                                {"scalar", DType::kF64, {2}, d.data(), 16}},
                               {{"format", "pt"}, {"note", "hi"}})
                  .ok());
  // Header padded to a multiple of 8 so the data buffer is aligned.
  std::string bytes = *ReadFile(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_len + 48 + 40 + 3 + 16);

  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  const SafetensorsReader& reader = **r;
  EXPECT_EQ(reader.path(), path);
  ASSERT_EQ(reader.tensors().size(), 5u);
  EXPECT_EQ(reader.tensors()[0].name, "zeta");
  EXPECT_EQ(reader.tensors()[1].name, "alpha");
  EXPECT_EQ(reader.tensors()[2].name, "empty");
  EXPECT_EQ(reader.tensors()[3].name, "mid");
  EXPECT_EQ(reader.tensors()[4].name, "scalar");
  EXPECT_EQ(reader.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hi"}}));
  EXPECT_EQ(reader.Find("nope"), nullptr);

  const TensorInfo* ta = reader.Find("zeta");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dtype, DType::kF32);
  EXPECT_EQ(ta->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ta->begin, 0u);
  EXPECT_EQ(ta->end, 48u);
  std::vector<float> got(12);
  ASSERT_TRUE(reader.ReadFloat(*ta, got.data(), got.size()).ok());
  EXPECT_EQ(got, a);

  const TensorInfo* tb = reader.Find("alpha");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->dtype, DType::kI64);
  std::vector<int64_t> got_b(5);
  std::memcpy(got_b.data(), reader.data(*tb), 40);
  EXPECT_EQ(got_b, b);

  const TensorInfo* te = reader.Find("empty");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ(te->shape, (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(te->begin, te->end);

  const TensorInfo* tc = reader.Find("mid");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->dtype, DType::kBool);
  EXPECT_EQ(std::vector<uint8_t>(reader.data(*tc), reader.data(*tc) + 3), c);

  const TensorInfo* td = reader.Find("scalar");
  ASSERT_NE(td, nullptr);
  float dd[2];
  ASSERT_TRUE(reader.ReadFloat(*td, dd, 2).ok());
  EXPECT_EQ(dd[0], static_cast<float>(1e-300));
  EXPECT_EQ(dd[1], -2.5f);
}

TEST_F(SafetensorsTest, EmptyFileHasNoTensors) {
  const std::string path = Path("empty.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->tensors().empty());
}

TEST_F(SafetensorsTest, ReaderIsMovable) {
  const float v[2] = {1.5f, -7.0f};
  const std::string path = Path("m.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"v", DType::kF32, {2}, v, 8}}).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  SafetensorsReader moved(std::move(**r));
  r->reset();  // destroying the moved-from reader must not unmap the data
  float out[2];
  ASSERT_TRUE(moved.ReadFloat(*moved.Find("v"), out, 2).ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -7.0f);
}

TEST_F(SafetensorsTest, ConvertsHalfAndBfloat16) {
  // Bit patterns with known values, including subnormals, signed zero and infinities.
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF,
                                     0x8000, 0x7C00, 0xFC00, 0x3555, 0x7E00};
  const std::vector<float> f16_want = {1.0f,
                                       -2.0f,
                                       65504.0f,
                                       std::ldexp(1.0f, -24),
                                       std::ldexp(1023.0f, -24),
                                       -0.0f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       0.333251953125f,
                                       std::numeric_limits<float>::quiet_NaN()};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC0A0, 0x0001, 0x7F80, 0x3EAB};
  const std::vector<float> bf16_want = {1.0f, -5.0f, std::bit_cast<float>(0x00010000u),
                                        std::numeric_limits<float>::infinity(),
                                        std::bit_cast<float>(0x3EAB0000u)};
  const std::string path = Path("h.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"h", DType::kF16, {10}, f16.data(), 20},
                                      {"b", DType::kBF16, {5}, bf16.data(), 10},
                                      {"i", DType::kI32, {1}, "abcd", 4}})
                  .ok());
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> got(10);
  ASSERT_TRUE((*r)->ReadFloat(*(*r)->Find("h"), got.data(), 10).ok());
  for (size_t i = 0; i < f16.size(); ++i) {
    SCOPED_TRACE(i);
    if (std::isnan(f16_want[i])) {
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(f16_want[i]));
    }
  }
  got.resize(5);
  ASSERT_TRUE((*r)->ReadFloat(*(*r)->Find("b"), got.data(), 5).ok());
  EXPECT_EQ(got, bf16_want);

  // Integer tensors are not floats; the error names the tensor and the file.
  float x;
  absl::Status s = (*r)->ReadFloat(*(*r)->Find("i"), &x, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'i'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("I32"));
  // A destination of the wrong size is refused.
  s = (*r)->ReadFloat(*(*r)->Find("b"), got.data(), 4);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("'b'"));
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  const float v[4] = {};
  const std::string path = Path("bad.safetensors");
  struct Case {
    std::vector<TensorToWrite> tensors;
    const char* what;
  };
  const Case cases[] = {
      {{{"a", DType::kF32, {2}, v, 8}, {"a", DType::kF32, {2}, v, 8}}, "duplicate tensor name 'a'"},
      {{{"a", DType::kF32, {2, 2}, v, 12}}, "needs 16 bytes, got 12"},
      {{{"a", DType::kF16, {2}, v, 8}}, "needs 4 bytes, got 8"},
      {{{"a", DType::kF32, {-1}, v, 0}}, "negative dimension"},
      {{{"__metadata__", DType::kF32, {1}, v, 4}}, "reserved"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::Status s = WriteSafetensors(path, c.tensors);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr(path));
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.what));
    EXPECT_FALSE(fs::exists(path));
  }
  EXPECT_TRUE(fs::is_empty(dir_));  // no temp file left behind
}

TEST_F(SafetensorsTest, WriteReplacesAtomically) {
  const float v[1] = {1.0f};
  const float w[2] = {2.0f, 3.0f};
  const std::string path = Path("r.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"v", DType::kF32, {1}, v, 4}}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {{"w", DType::kF32, {2}, w, 8}}).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Find("v"), nullptr);
  ASSERT_NE((*r)->Find("w"), nullptr);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsTest, OpenMissingFile) {
  const std::string path = Path("absent.safetensors");
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(path));
}

struct MalformedCase {
  const char* name;
  std::string header;
  size_t data_bytes;
  int64_t header_len;  // -1: the real length
  const char* what;
};

TEST_F(SafetensorsTest, RejectsMalformedFiles) {
  const std::string f4 = R"("dtype":"F32","shape":[1])";
  const MalformedCase cases[] = {
      {"header_len_zero", "", 0, 0, "header length is 0"},
      {"header_too_large", "{}", 0, 100'000'001, "exceeds the limit of 100000000"},
      {"header_past_end", "{}", 0, 3, "truncated: header length 3"},
      {"not_json", "{\"a\": ", 0, -1, "header is not valid JSON"},
      {"not_utf8", "{\"\xff\": 1}", 0, -1, "header is not valid JSON"},
      {"not_object", "[1, 2]", 0, -1, "header is not a JSON object"},
      {"entry_not_object", R"({"a": 5})", 0, -1, "tensor 'a' entry is not an object"},
      {"missing_dtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, -1,
       "tensor 'a' is missing 'dtype'"},
      {"missing_shape", R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, -1,
       "tensor 'a' is missing 'shape'"},
      {"missing_offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, -1,
       "tensor 'a' is missing 'data_offsets'"},
      {"dtype_not_string", R"({"a":{"dtype":1,"shape":[1],"data_offsets":[0,4]}})", 4, -1,
       "'dtype' is not a string"},
      {"unknown_dtype", R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1, -1,
       "unknown dtype 'F8_E4M3'"},
      {"shape_not_array", R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4, -1,
       "'shape' is not an array"},
      {"shape_float", R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4, -1,
       "'shape' has a non-integer entry 1.5"},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,4]}})", 4, -1,
       "negative dimension -1"},
      {"offsets_one", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4, -1,
       "'data_offsets' is not an array of two integers"},
      {"offsets_string", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":["0",4]}})", 4, -1,
       "'data_offsets' has a non-integer entry"},
      {"offsets_negative", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4, -1,
       "'data_offsets' has a negative entry -4"},
      {"begin_after_end", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, -1,
       "has begin > end"},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, -1,
       "needs 8 bytes but data_offsets [0, 4) span 4"},
      {"shape_overflow",
       R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4, -1,
       "overflows"},
      {"end_past_data", "{\"a\":{" + f4 + ",\"data_offsets\":[0,4]}}", 2, -1,
       "tensor 'a' data_offsets [0, 4) out of range (data is 2 bytes)"},
      {"overlap",
       "{\"a\":{" + f4 + ",\"data_offsets\":[0,4]},\"b\":{" + f4 + ",\"data_offsets\":[2,6]}}", 6,
       -1, "tensor 'b' data_offsets [2, 6) overlap the previous tensor"},
      {"gap",
       "{\"a\":{" + f4 + ",\"data_offsets\":[0,4]},\"b\":{" + f4 + ",\"data_offsets\":[6,10]}}", 10,
       -1, "tensor 'b' data_offsets [6, 10) leave a gap"},
      {"gap_at_start", "{\"a\":{" + f4 + ",\"data_offsets\":[4,8]}}", 8, -1,
       "tensor 'a' data_offsets [4, 8) leave a gap"},
      {"trailing_bytes", "{\"a\":{" + f4 + ",\"data_offsets\":[0,4]}}", 5, -1,
       "data is 5 bytes but the tensors cover only 4"},
      {"duplicate_name",
       "{\"a\":{" + f4 + ",\"data_offsets\":[0,4]},\"a\":{" + f4 + ",\"data_offsets\":[4,8]}}", 8,
       -1, "duplicate key 'a'"},
      {"duplicate_field", R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})",
       4, -1, "duplicate key 'dtype'"},
      {"metadata_not_object", R"({"__metadata__":[1]})", 0, -1, "'__metadata__' is not an object"},
      {"metadata_not_string", R"({"__metadata__":{"k":1}})", 0, -1,
       "'__metadata__' value for 'k' is not a string"},
  };
  for (const MalformedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path =
        RawFile(std::string(c.name) + ".safetensors", c.header, c.data_bytes, c.header_len);
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(path + ": "));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.what));
  }
}

TEST_F(SafetensorsTest, RejectsShortFiles) {
  for (size_t n : {0, 1, 7}) {
    const std::string path = Path("short" + std::to_string(n));
    std::ofstream(path, std::ios::binary) << std::string(n, '\x01');
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(path + ": truncated"));
  }
}

// Cross-checks against the reference implementation: the Python `safetensors` package reads
// what we write, and we read what it writes (F16/BF16 converted the way torch converts them).
constexpr char kPythonScript[] = R"PY(
import sys
try:
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file as np_load
    from safetensors.torch import load_file as pt_load, save_file as pt_save
except ImportError as e:
    print("skip:", e)
    sys.exit(77)

ours, theirs = sys.argv[1], sys.argv[2]
t = np_load(ours)
assert list(t) and set(t) == {"f32", "i64", "u8", "f64", "f16"}, sorted(t)
assert t["f32"].dtype == np.float32 and t["f32"].shape == (2, 3), t["f32"]
assert (t["f32"] == np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1).all(), t["f32"]
assert t["i64"].dtype == np.int64 and (t["i64"] == np.array([-5, 0, 1 << 40])).all(), t["i64"]
assert t["u8"].dtype == np.uint8 and (t["u8"] == np.array([0, 255, 7])).all(), t["u8"]
assert t["f64"].dtype == np.float64 and (t["f64"] == np.array([1.0 / 3.0])).all(), t["f64"]
assert t["f16"].dtype == np.float16 and (t["f16"] == np.array([1.0, -2.0], np.float16)).all()
with safe_open(ours, framework="pt") as f:
    assert f.metadata() == {"format": "pt", "who": "ringmaster"}, f.metadata()
    assert set(f.keys()) == set(t), f.keys()
pt_load(ours)

# Values that exercise rounding, subnormals, signed zero and overflow.
x = torch.tensor([0.0, -0.0, 1.0, -1.5, 3.14159, 1e-3, 6.1e-5, 1e-7, 65504.0, 1e5, -1e38,
                  float("inf"), float("-inf"), 2.0 ** -130], dtype=torch.float32)
tensors = {}
for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16), ("f32", torch.float32)):
    tensors[name] = x.to(dt).reshape(2, 7).clone()
    tensors[name + "_as_f32"] = x.to(dt).to(torch.float32).reshape(2, 7).clone()
tensors["i8"] = torch.tensor([-1, 2], dtype=torch.int8)
pt_save(tensors, theirs, metadata={"format": "pt"})
print("ok")
)PY";

TEST_F(SafetensorsTest, PythonCrossCheck) {
  const char* python = std::getenv("RINGMASTER_PYTHON");
  if (python == nullptr || *python == '\0') GTEST_SKIP() << "RINGMASTER_PYTHON not set";

  const std::vector<float> f32 = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  const std::vector<int64_t> i64 = {-5, 0, int64_t{1} << 40};
  const std::vector<uint8_t> u8 = {0, 255, 7};
  const double f64 = 1.0 / 3.0;
  const uint16_t f16[2] = {0x3C00, 0xC000};
  const std::string ours = Path("ours.safetensors");
  const std::string theirs = Path("theirs.safetensors");
  ASSERT_TRUE(WriteSafetensors(ours,
                               {{"f32", DType::kF32, {2, 3}, f32.data(), 24},
                                {"i64", DType::kI64, {3}, i64.data(), 24},
                                {"u8", DType::kU8, {3}, u8.data(), 3},
                                {"f64", DType::kF64, {1}, &f64, 8},
                                {"f16", DType::kF16, {2}, f16, 4}},
                               {{"format", "pt"}, {"who", "ringmaster"}})
                  .ok());
  const std::string script = Path("check.py");
  std::ofstream(script) << kPythonScript;
  const std::string log = Path("python.log");
  // StrCat, not operator+: GCC 12 gives a false -Wrestrict on "'" + std::string(...).
  const std::string cmd =
      absl::StrCat("'", python, "' '", script, "' '", ours, "' '", theirs, "' >'", log, "' 2>&1");
  const int rc = std::system(cmd.c_str());
  const std::string output = ReadFile(log).value_or("");
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) GTEST_SKIP() << output;
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << output;

  absl::StatusOr<std::unique_ptr<SafetensorsReader>> r = SafetensorsReader::Open(theirs);
  ASSERT_TRUE(r.ok()) << r.status();
  const SafetensorsReader& reader = **r;
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  const std::pair<const char*, DType> cases[] = {
      {"f16", DType::kF16}, {"bf16", DType::kBF16}, {"f32", DType::kF32}};
  for (const auto& [name, dtype] : cases) {
    SCOPED_TRACE(name);
    const TensorInfo* t = reader.Find(name);
    const TensorInfo* ref = reader.Find(std::string(name) + "_as_f32");
    ASSERT_NE(t, nullptr);
    ASSERT_NE(ref, nullptr);
    EXPECT_EQ(t->dtype, dtype);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 7}));
    std::vector<float> got(14), want(14);
    ASSERT_TRUE(reader.ReadFloat(*t, got.data(), 14).ok());
    ASSERT_TRUE(reader.ReadFloat(*ref, want.data(), 14).ok());
    for (int i = 0; i < 14; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  const TensorInfo* i8 = reader.Find("i8");
  ASSERT_NE(i8, nullptr);
  EXPECT_EQ(i8->dtype, DType::kI8);
  EXPECT_EQ(static_cast<int8_t>(reader.data(*i8)[0]), -1);
  EXPECT_EQ(static_cast<int8_t>(reader.data(*i8)[1]), 2);
}

// Regression (safetensors_fuzz): an empty F32 tensor read into an empty vector (data() may be
// null) called memcpy(nullptr, p, 0), which UBSan reports as undefined behaviour.
TEST_F(SafetensorsTest, ReadFloatOfEmptyTensorIntoNull) {
  const std::string path = Path("empty.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"z", DType::kF32, {0, 4}, nullptr, 0},
                                      {"h", DType::kF16, {0}, nullptr, 0}})
                  .ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const TensorInfo& t : (*r)->tensors()) {
    EXPECT_TRUE((*r)->ReadFloat(t, nullptr, 0).ok()) << t.name;
  }
}

// FromBuffer (what the fuzz target drives) runs Open's checks on bytes in memory, names the
// buffer as Open names the file, and never reads past the buffer it is given.
TEST_F(SafetensorsTest, FromBufferMatchesOpen) {
  const float w[3] = {1.5f, -2.0f, 0.25f};
  const std::string path = Path("w.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", DType::kF32, {3}, w, sizeof w}}, {{"k", "v"}}).ok());
  absl::StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const auto* p = reinterpret_cast<const uint8_t*>(bytes->data());
  auto r = SafetensorsReader::FromBuffer(p, bytes->size(), "mem");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->path(), "mem");
  EXPECT_EQ((*r)->metadata().at("k"), "v");
  const TensorInfo* t = (*r)->Find("w");
  ASSERT_NE(t, nullptr);
  float out[3];
  ASSERT_TRUE((*r)->ReadFloat(*t, out, 3).ok());
  EXPECT_EQ(out[2], 0.25f);
  // One byte short: the last tensor no longer fits.
  auto cut = SafetensorsReader::FromBuffer(p, bytes->size() - 1, "mem");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("mem: tensor 'w'"));
  auto tiny = SafetensorsReader::FromBuffer(p, 7, "mem");
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(std::string(tiny.status().message()), HasSubstr("mem: truncated: buffer is 7 bytes"));
}

}  // namespace
}  // namespace ringmaster::trainer
