#include "trainer/train/tensorboard_events.h"

#include <array>
#include <cstring>

namespace ringmaster::trainer {
namespace {

// Byte-at-a-time table of the reflected Castagnoli polynomial: 1 KiB, computed once. The
// trainer writes a few hundred bytes a step, so a faster CRC would buy nothing.
std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}

// Protocol buffer wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutKey(uint32_t field, uint32_t wire_type, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | wire_type, out);
}

void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutDouble(uint32_t field, double v, std::string* out) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(field, kFixed64, out);
  PutLittleEndian(bits, 8, out);
}

void PutFloat(uint32_t field, float v, std::string* out) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutKey(field, kFixed32, out);
  PutLittleEndian(bits, 4, out);
}

// int64 as protobuf writes it: a negative value is its two's complement, ten bytes.
void PutInt64(uint32_t field, int64_t v, std::string* out) {
  PutKey(field, kVarint, out);
  PutVarint(static_cast<uint64_t>(v), out);
}

void PutBytes(uint32_t field, std::string_view v, std::string* out) {
  PutKey(field, kLengthDelimited, out);
  PutVarint(v.size(), out);
  out->append(v);
}

// Event's field numbers.
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 7;
// Summary.value; Summary.Value's tag and simple_value; SessionLog.status and its START.
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr uint32_t kSessionLogStatus = 1, kSessionLogStart = 1;

}  // namespace

uint32_t Crc32c(std::string_view data) {
  static const std::array<uint32_t, 256> table = MakeCrc32cTable();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string FrameRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutLittleEndian(data.size(), 8, &out);
  PutLittleEndian(MaskCrc32c(Crc32c(out)), 4, &out);
  out.append(data);
  PutLittleEndian(MaskCrc32c(Crc32c(data)), 4, &out);
  return out;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string e;
  PutDouble(kWallTime, wall_time, &e);
  PutBytes(kFileVersion, "brain.Event:2", &e);
  return e;
}

std::string EncodeScalarsEvent(double wall_time, int64_t step,
                               const std::vector<ScalarValue>& values) {
  std::string summary;
  for (const ScalarValue& v : values) {
    std::string value;
    PutBytes(kValueTag, v.tag, &value);
    PutFloat(kValueSimpleValue, v.value, &value);
    PutBytes(kSummaryValue, value, &summary);
  }
  std::string e;
  PutDouble(kWallTime, wall_time, &e);
  PutInt64(kStep, step, &e);
  PutBytes(kSummary, summary, &e);
  return e;
}

std::string EncodeSessionStartEvent(double wall_time, int64_t step) {
  std::string log;
  PutKey(kSessionLogStatus, kVarint, &log);
  PutVarint(kSessionLogStart, &log);
  std::string e;
  PutDouble(kWallTime, wall_time, &e);
  PutInt64(kStep, step, &e);
  PutBytes(kSessionLog, log, &e);
  return e;
}

}  // namespace ringmaster::trainer
