// Element codecs for the data-parallel wire: fp16, bf16 and blockwise int8, each with optional
// error feedback, and the fp32 identity. Pure computation on caller-owned buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringmaster::trainer {

// Wire formats (all multi-byte values little-endian, no header; the receiver knows c and n):
//  - kNone: n fp32 values.
//  - kFp16: n IEEE binary16 values, round-to-nearest-even, subnormals kept. Finite values beyond
//    ±65504 and ±inf saturate to ±65504, so a gradient never becomes inf on the wire (an fp32
//    gradient that is already inf arrives as ±65504); NaN stays NaN (quiet).
//  - kBf16: n bfloat16 values (top 16 bits of the fp32, round-to-nearest-even); NaN stays NaN.
//    bf16 has fp32's range, so only values within half a bf16 ulp of FLT_MAX round to inf.
//  - kInt8: blocks of kInt8BlockSize elements (the last one may be shorter). First all block
//    scales (fp32, scale = max|y| / 127 over the block; a block whose max |y| is 0 or subnormal,
//    below 2^-126, has scale 0 and is sent as zeros, its residual cleared), then the n int8 codes,
//    code = round-half-away-from-zero(y / scale) clamped to [-127, 127]. Decode is code * scale. A
//    block containing inf or NaN gets a non-finite scale and decodes to NaN, so an overflow stays
//    visible instead of being silently dropped.
enum class WireCodec { kNone, kFp16, kBf16, kInt8 };

// "none", "fp16", "bf16", "int8" (exact, lower case); anything else is InvalidArgument.
absl::StatusOr<WireCodec> ParseWireCodec(std::string_view name);
std::string_view WireCodecName(WireCodec c);

inline constexpr size_t kInt8BlockSize = 256;

// Bytes that Encode writes for n floats (kNone: 4n; fp16/bf16: 2n; int8: 4*ceil(n/256) + n).
size_t EncodedBytes(WireCodec c, size_t n);

// Encodes x[0..n) into out[0..EncodedBytes(c, n)). With residual != nullptr (error feedback) it
// encodes y = x + residual and then sets residual = y - Decode(encoded), exactly what the
// receiver will see, so the quantisation error is carried into the next step instead of lost.
// A residual that would be non-finite (y was inf/NaN) is set to 0 instead: the bad value is sent
// this step (visible to the receiver, as NaN or ±65504 for fp16) but not re-sent forever.
// `residual` may not alias `x` or `out`.
void Encode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out);
// out[0..n) = decoded values.
void Decode(WireCodec c, const uint8_t* in, size_t n, float* out);
// acc[0..n) += decoded values.
void DecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc);

}  // namespace ringmaster::trainer
