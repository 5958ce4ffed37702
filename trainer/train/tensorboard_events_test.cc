// ctest-labels: unit
// The event file format against its definition: CRC-32C check values, the mask, record framing
// read back by a reader written here from the format, and Event bytes derived by hand from the
// protobuf wire format. (tests/trainer_tensorboard.sh reads real files with TensorBoard's own
// reader.)
#include "trainer/train/tensorboard_events.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::trainer {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

uint64_t LittleEndian(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = s.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

// Reads TFRecord records, checking both CRCs; nullopt on any damage.
std::optional<std::vector<std::string>> ReadRecords(std::string_view file) {
  std::vector<std::string> out;
  while (!file.empty()) {
    if (file.size() < 12) return std::nullopt;
    const uint64_t len = LittleEndian(file.substr(0, 8));
    if (LittleEndian(file.substr(8, 4)) != MaskCrc32c(Crc32c(file.substr(0, 8)))) {
      return std::nullopt;
    }
    if (file.size() < 16 + len) return std::nullopt;
    const std::string_view data = file.substr(12, len);
    if (LittleEndian(file.substr(12 + len, 4)) != MaskCrc32c(Crc32c(data))) return std::nullopt;
    out.emplace_back(data);
    file.remove_prefix(16 + len);
  }
  return out;
}

TEST(Crc32cTest, StandardCheckValues) {
  // The CRC catalogue's check value (the CRC of "123456789") and the iSCSI test patterns
  // (RFC 3720, B.4).
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32cTest, MaskRotatesRightBy15AndAddsTheConstant) {
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  // 0x00008000 rotated right by 15 is 1; 1 rotated is 0x00020000.
  EXPECT_EQ(MaskCrc32c(0x00008000u), 0xa282ead9u);
  EXPECT_EQ(MaskCrc32c(1), 0xa282ead8u + 0x00020000u);
  // The addition wraps modulo 2^32.
  EXPECT_EQ(MaskCrc32c(0xffffffffu), 0xa282ead7u);
}

TEST(FrameRecordTest, EmptyRecordIsLengthAndTwoMaskedCrcs) {
  const std::string r = FrameRecord("");
  ASSERT_EQ(r.size(), 16u);
  EXPECT_EQ(r.substr(0, 8), std::string(8, '\0'));
  EXPECT_EQ(LittleEndian(r.substr(8, 4)), MaskCrc32c(Crc32c(std::string(8, '\0'))));
  EXPECT_EQ(LittleEndian(r.substr(12, 4)), 0xa282ead8u);  // mask(CRC of nothing = 0)
}

TEST(FrameRecordTest, RecordsReadBack) {
  const std::vector<std::string> records = {"a", "", std::string(300, 'x'),
                                            EncodeFileVersionEvent(12.5)};
  std::string file;
  for (const std::string& r : records) file += FrameRecord(r);
  const std::optional<std::vector<std::string>> back = ReadRecords(file);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, records);
  // The length is little-endian: 300 = 0x012c.
  const std::string big = FrameRecord(std::string(300, 'x'));
  EXPECT_EQ(big.substr(0, 8), Bytes({0x2c, 0x01, 0, 0, 0, 0, 0, 0}));
  // Any flipped byte is caught by one of the CRCs.
  for (size_t i = 0; i < file.size(); ++i) {
    std::string bad = file;
    bad[i] ^= 0x01;
    EXPECT_FALSE(ReadRecords(bad).has_value()) << "byte " << i;
  }
}

std::string LittleEndianDouble(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  return s;
}

TEST(EncodeEventTest, FileVersionEvent) {
  // wall_time: key (1 << 3 | fixed64) = 0x09; file_version: key (3 << 3 | length) = 0x1a.
  EXPECT_EQ(EncodeFileVersionEvent(1.5),
            "\x09" + LittleEndianDouble(1.5) + "\x1a\x0d" + std::string("brain.Event:2"));
}

TEST(EncodeEventTest, ScalarsEvent) {
  // Value{tag "a" (0x0a 01 'a'), simple_value 2.0f (0x15 = 2 << 3 | fixed32, 0x40000000 LE)}:
  // 8 bytes; Summary{value (0x0a 08 ...)}: 10 bytes; Event{wall_time, step 3 (0x10 03),
  // summary (0x2a = 5 << 3 | length, 0x0a ...)}.
  const std::string value = Bytes({0x0a, 0x01, 'a', 0x15, 0, 0, 0, 0x40});
  const std::string summary = Bytes({0x0a, 0x08}) + value;
  EXPECT_EQ(EncodeScalarsEvent(1.5, 3, {{"a", 2.0f}}),
            "\x09" + LittleEndianDouble(1.5) + Bytes({0x10, 0x03, 0x2a, 0x0a}) + summary);
  // Two values: two Summary.value entries, in order. Step 300 is the varint ac 02.
  const std::string value_b = Bytes({0x0a, 0x01, 'b', 0x15, 0, 0, 0x80, 0xbf});  // -1.0f
  EXPECT_EQ(EncodeScalarsEvent(0, 300, {{"a", 2.0f}, {"b", -1.0f}}),
            "\x09" + LittleEndianDouble(0) + Bytes({0x10, 0xac, 0x02, 0x2a, 0x14}) + summary +
                Bytes({0x0a, 0x08}) + value_b);
}

TEST(EncodeEventTest, NegativeStepIsTenByteVarint) {
  const std::string e = EncodeScalarsEvent(0, -1, {});
  EXPECT_EQ(e.substr(9, 11),
            Bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
}

TEST(EncodeEventTest, SessionStartEvent) {
  // step 7; session_log (7 << 3 | length = 0x3a; 6 is the deprecated log_message) holding
  // status (0x08) START (1).
  EXPECT_EQ(EncodeSessionStartEvent(2.0, 7),
            "\x09" + LittleEndianDouble(2.0) + Bytes({0x10, 0x07, 0x3a, 0x02, 0x08, 0x01}));
}

}  // namespace
}  // namespace ringmaster::trainer
