// The wire codecs of trainer/parallel/wire_codec.h (fp32, fp16, bf16, blockwise int8, each with
// optional error feedback) as CUDA kernels on device buffers, byte-identical to the CPU codec:
// the same wire format, the same bits for every input (NaN, ±inf, subnormals, saturation
// included) and the same residuals. The CPU codec is the reference (wire_codec_gpu_test).
//
// Launchers enqueue on `stream` and return the launch's cudaError_t; nothing is synchronised.
// Every pointer is device memory. Encoded buffers must be 4-byte aligned (cudaMalloc's are);
// a misaligned one is cudaErrorInvalidValue. Bit-exactness needs IEEE fp32 division and no
// fused multiply-adds where the CPU rounds the product: the kernels use __fmul_rn/__fadd_rn for
// those, and must not be built with --use_fast_math (nor, under the emulator, with FP
// contraction: the target is compiled with -ffp-contract=off).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainer/parallel/wire_codec.h"

namespace ringmaster::trainer::cuda {

// Encode(c, x, n, residual, out) of wire_codec.h on the device: out receives EncodedBytes(c, n)
// bytes; with residual (n floats, error feedback) it encodes x + residual and leaves the new
// residual there. residual may not alias x or out.
cudaError_t WireEncode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out,
                       cudaStream_t stream);
// out[0..n) = decoded values of in (EncodedBytes(c, n) bytes).
cudaError_t WireDecode(WireCodec c, const uint8_t* in, size_t n, float* out, cudaStream_t stream);
// acc[0..n) += decoded values of in.
cudaError_t WireDecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc,
                          cudaStream_t stream);

// ---- Zero-chunk skipping (trainer/parallel/two_stage_allreduce.h): chunks of kInt8BlockSize.

// Bytes of the chunk mask for n floats: ceil(ceil(n / 256) / 8).
size_t WireChunkMaskBytes(size_t n);
// mask (WireChunkMaskBytes(n) bytes): bit c % 8 of byte c / 8 is set when data or residual (when
// given) holds a value that is not ±0 (NaN counts) in chunk c = [256c, min(256(c+1), n)).
// Every byte is written, bits past the last chunk cleared.
cudaError_t WireChunkNonZeroMask(const float* data, const float* residual, size_t n, uint8_t* mask,
                                 cudaStream_t stream);

// ---- The steps of the two-stage all-reduce (device_two_stage_allreduce.h) on encoded chunks.
// A chunk is kInt8BlockSize floats encoded on their own: EncodedBytes(c, 256) bytes (int8: its
// scale, then its 256 codes); the last chunk of data, when short, is encoded zero-padded, as
// the CPU does. `active` (device, m entries) lists the chunks taking part, in order; nullptr
// means every chunk (active[v] = v).

// Slot v of `slots` in out (each EncodedBytes(c, 256) bytes): for v < m the chunk active[v] of
// data[0..n) (plus its residual, then updated, when residual is given), for v >= m zero bytes.
cudaError_t WireEncodeChunks(WireCodec c, const float* data, size_t n, float* residual,
                             const uint32_t* active, size_t m, size_t slots, uint8_t* out,
                             cudaStream_t stream);
// sum[k·256 + i] (per chunks) = the sum over r = 0..g-1, in rank order, of the decoded element
// i of chunk k of run r, where run r starts at in + r·run_bytes.
cudaError_t WireSumRuns(WireCodec c, const uint8_t* in, int g, size_t per, size_t run_bytes,
                        float* sum, cudaStream_t stream);
// Encodes the per chunks of sum into out (slot k for chunk k). Slot k is the all-reduce's chunk
// v = first + k: with residual and v < m it is encoded with error feedback from a zero residual,
// and that rounding error is added to residual at chunk active[v]'s positions (< n); otherwise
// it is encoded plainly.
cudaError_t WireEncodeOwnedSums(WireCodec c, const float* sum, size_t per, size_t first, size_t m,
                                const uint32_t* active, size_t n, float* residual, uint8_t* out,
                                cudaStream_t stream);
// data[256·active[v] + i] = decoded element i of slot v of in, for v < m and positions < n.
cudaError_t WireDecodeChunks(WireCodec c, const uint8_t* in, size_t m, const uint32_t* active,
                             size_t n, float* data, cudaStream_t stream);

}  // namespace ringmaster::trainer::cuda
