// TensorBoard's event file format, written by hand: the bytes of the few Event messages the
// trainer writes and the TFRecord framing around each.
//
// A file is a sequence of records, each
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes |
//   `length` bytes of a serialized Event | uint32 masked CRC32C of them
// where CRC32C is the Castagnoli CRC and mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
//
// The Event fields written (TensorBoard's event.proto numbers them so):
//   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
//                Summary summary = 5; SessionLog session_log = 7; }
//   Summary    { repeated Value value = 1; }
//   Value      { string tag = 1; float simple_value = 2; }
//   SessionLog { Status status = 1; }  (START = 1)
// The first record of a file carries only wall_time and file_version "brain.Event:2".
//
// A small encoder rather than a .proto compiled with protobuf: four messages, seven fields, all
// written and none read; and the trainer builds without protoc or libprotobuf (only the optional
// control plane needs them), which a .proto here would end. The tests read the files back with
// the tensorboard package's own reader.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::trainer {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78, initial and final XOR 0xffffffff).
uint32_t Crc32c(std::string_view data);
// TFRecord's mask over a CRC, so that a CRC stored inside checksummed data does not cancel.
uint32_t MaskCrc32c(uint32_t crc);

// One record of a TFRecord file holding `data`.
std::string FrameRecord(std::string_view data);

struct ScalarValue {
  std::string tag;
  float value = 0;  // simple_value is a float in the format
};

// The file's first Event: wall_time and file_version "brain.Event:2".
std::string EncodeFileVersionEvent(double wall_time);
// An Event at `step` whose summary holds `values` in order.
std::string EncodeScalarsEvent(double wall_time, int64_t step,
                               const std::vector<ScalarValue>& values);
// An Event with SessionLog START at `step`: TensorBoard drops the data it read earlier at steps
// >= `step` (a run resumed from a checkpoint redoes those steps).
std::string EncodeSessionStartEvent(double wall_time, int64_t step);

}  // namespace ringmaster::trainer
