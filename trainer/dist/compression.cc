// Gradient compression for the data-parallel wire: fp16/bf16/int8 element codecs with error
// feedback, and PowerSGD low-rank compression (sum semantics) over a caller-given allreduce.
#include "trainer/dist/compression.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::trainer {
namespace {

// ---- Little-endian byte access: plain (vectorisable) loads/stores on little-endian hosts. ----

constexpr bool kLittleEndian = std::endian::native == std::endian::little;

inline void StoreU16(uint8_t* p, uint16_t v) {
  if constexpr (kLittleEndian) {
    std::memcpy(p, &v, 2);
  } else {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
  }
}
inline uint16_t LoadU16(const uint8_t* p) {
  if constexpr (kLittleEndian) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  } else {
    return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
  }
}
inline void StoreF32(uint8_t* p, float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if constexpr (kLittleEndian) {
    std::memcpy(p, &u, 4);
  } else {
    p[0] = static_cast<uint8_t>(u);
    p[1] = static_cast<uint8_t>(u >> 8);
    p[2] = static_cast<uint8_t>(u >> 16);
    p[3] = static_cast<uint8_t>(u >> 24);
  }
}
inline float LoadF32(const uint8_t* p) {
  uint32_t u;
  if constexpr (kLittleEndian) {
    std::memcpy(&u, p, 4);
  } else {
    u = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
        (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }
  return std::bit_cast<float>(u);
}

// ---- fp16 (IEEE binary16) ----
// Integer-only and branch-free (every case computed, then selected) so that the loops
// vectorise.

// Round-to-nearest-even; subnormals kept; |x| >= 65520 (which would round to inf) and ±inf
// saturate to ±65504; NaN becomes a quiet NaN.
inline uint16_t FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t u = bits & 0x7fffffffu;
  const int32_t a = static_cast<int32_t>(u);  // |f| as ordered integer bits
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
  const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;  // 0xc8000000 = -112 << 23
  // Below 2^-14 (fp16 subnormal or zero): code = mant * 2^(exp - 126) rounded to nearest even,
  // i.e. mant >> (126 - exp) with the same rounding; shifts past 31 give 0 (as does an fp32
  // subnormal). Other lanes compute garbage here that the selects below discard.
  const uint32_t shift = std::min(static_cast<uint32_t>(126 - (a >> 23)), 31u);
  const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  const uint32_t sub = (mant + ((1u << shift) >> 1) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);  // quiet bit set, top payload bits kept
  uint32_t o = a < 0x38800000 ? sub : normal;
  o = a >= 0x477ff000 ? 0x7bffu : o;  // >= 65520 (incl. inf): saturate at 65504
  o = a > 0x7f800000 ? nan : o;
  return static_cast<uint16_t>(sign | o);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // All-ones masks (GCC vectorises mask arithmetic here, not a chain of ?: selects).
  const uint32_t is_infnan = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  const uint32_t is_normal = 0u - static_cast<uint32_t>(em >= 0x0400u);
  // Exponent 15 -> 127 (and 31 -> 255 for inf/NaN, payload kept).
  const uint32_t normal = (em << 13) + 0x38000000u + (is_infnan & 0x38000000u);
  const uint32_t sub =  // subnormal or zero: em * 2^-24, exact
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  return std::bit_cast<float>(((normal & is_normal) | (sub & ~is_normal)) | sign);
}

// ---- bf16 ----

inline uint16_t FloatToBf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;  // quiet: a payload only in the low bits stays NaN
  return static_cast<uint16_t>(static_cast<int32_t>(u & 0x7fffffffu) > 0x7f800000 ? nan : rounded);
}

inline float Bf16ToFloat(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline float FiniteOrZero(float v) { return std::isfinite(v) ? v : 0.0f; }

// GCC's default for GNU dialects (-ffp-contract=fast) fuses `y - code * scale` and
// `acc + code * scale` into FMAs, which skips the rounding of the decoded value: the residual
// would then not be y minus what the receiver sees, and DecodeAdd would differ from Decode + add.
// The int8 loops therefore round the product on its own. (fp16/bf16 decoding has no inexact
// product.)
#if defined(__GNUC__) && !defined(__clang__)
#define RM_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define RM_NO_FP_CONTRACT
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

// ---- Codec bodies. `to`/`from` are lambdas, inlined into the loops. ----

template <typename To, typename From>
void Encode16(const float* x, size_t n, float* residual, uint8_t* out, To to, From from) {
  if (residual == nullptr) {
    for (size_t i = 0; i < n; ++i) StoreU16(out + 2 * i, to(x[i]));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float y = x[i] + residual[i];
    const uint16_t h = to(y);
    StoreU16(out + 2 * i, h);
    residual[i] = FiniteOrZero(y - from(h));
  }
}

template <bool kAdd, typename From>
void Decode16(const uint8_t* in, size_t n, float* out, From from) {
  for (size_t i = 0; i < n; ++i) {
    const float v = from(LoadU16(in + 2 * i));
    if constexpr (kAdd) {
      out[i] += v;
    } else {
      out[i] = v;
    }
  }
}

size_t Int8Blocks(size_t n) { return (n + kInt8BlockSize - 1) / kInt8BlockSize; }

RM_NO_FP_CONTRACT void EncodeInt8(const float* x, size_t n, float* residual, uint8_t* out) {
  const size_t blocks = Int8Blocks(n);
  uint8_t* codes = out + 4 * blocks;
  float ybuf[kInt8BlockSize];
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kInt8BlockSize;
    const size_t len = std::min(kInt8BlockSize, n - begin);
    const float* y = x + begin;
    if (residual != nullptr) {
      for (size_t i = 0; i < len; ++i) ybuf[i] = x[begin + i] + residual[begin + i];
      y = ybuf;
    }
    // max |y| on the bit patterns: for non-negative floats integer order is float order, and
    // inf/NaN compare above every finite value.
    int32_t amax_bits = 0;
    for (size_t i = 0; i < len; ++i) {
      const int32_t a = std::bit_cast<int32_t>(y[i]) & 0x7fffffff;
      amax_bits = a > amax_bits ? a : amax_bits;
    }
    const bool finite = amax_bits <= 0x7f7fffff;  // FLT_MAX
    const float amax = std::bit_cast<float>(amax_bits);
    // A non-finite block gets a NaN scale and zero codes: it decodes to NaN (visible overflow).
    const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    StoreF32(out + 4 * b, scale);
    int8_t* c = reinterpret_cast<int8_t*>(codes + begin);
    if (!finite || scale == 0.0f) {
      // All-zero block (or one whose scale underflows to 0): every code is 0.
      std::memset(c, 0, len);
      if (residual != nullptr) {
        for (size_t i = 0; i < len; ++i) residual[begin + i] = finite ? y[i] : 0.0f;
      }
      continue;
    }
    for (size_t i = 0; i < len; ++i) {
      // Round half away from zero (std::round, written so that it vectorises): q - trunc(q) is
      // exact, unlike q + 0.5 which can round up across the half. |q| <= 127 up to the rounding
      // of scale (at most ~254 when scale is subnormal), so the int conversion is safe.
      const float q = y[i] / scale;
      int t = static_cast<int>(q);
      const float frac = q - static_cast<float>(t);
      t += frac >= 0.5f;
      t -= frac <= -0.5f;
      c[i] = static_cast<int8_t>(std::min(127, std::max(-127, t)));
    }
    if (residual != nullptr) {
      for (size_t i = 0; i < len; ++i) {
        residual[begin + i] = y[i] - static_cast<float>(c[i]) * scale;
      }
    }
  }
}

template <bool kAdd>
RM_NO_FP_CONTRACT void DecodeInt8(const uint8_t* in, size_t n, float* out) {
  const size_t blocks = Int8Blocks(n);
  const int8_t* codes = reinterpret_cast<const int8_t*>(in + 4 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kInt8BlockSize;
    const size_t len = std::min(kInt8BlockSize, n - begin);
    const float scale = LoadF32(in + 4 * b);
    for (size_t i = begin; i < begin + len; ++i) {
      const float v = static_cast<float>(codes[i]) * scale;
      if constexpr (kAdd) {
        out[i] += v;
      } else {
        out[i] = v;
      }
    }
  }
}

template <bool kAdd>
void DecodeImpl(WireCodec c, const uint8_t* in, size_t n, float* out) {
  switch (c) {
    case WireCodec::kNone:
      for (size_t i = 0; i < n; ++i) {
        const float v = LoadF32(in + 4 * i);
        if constexpr (kAdd) {
          out[i] += v;
        } else {
          out[i] = v;
        }
      }
      return;
    case WireCodec::kFp16:
      Decode16<kAdd>(in, n, out, HalfToFloat);
      return;
    case WireCodec::kBf16:
      Decode16<kAdd>(in, n, out, Bf16ToFloat);
      return;
    case WireCodec::kInt8:
      DecodeInt8<kAdd>(in, n, out);
      return;
  }
}

}  // namespace

absl::StatusOr<WireCodec> ParseWireCodec(std::string_view name) {
  for (WireCodec c : {WireCodec::kNone, WireCodec::kFp16, WireCodec::kBf16, WireCodec::kInt8}) {
    if (name == WireCodecName(c)) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown wire codec \"",
                                                 absl::string_view(name.data(), name.size()),
                                                 "\" (expected none, fp16, bf16 or int8)"));
}

std::string_view WireCodecName(WireCodec c) {
  switch (c) {
    case WireCodec::kNone:
      return "none";
    case WireCodec::kFp16:
      return "fp16";
    case WireCodec::kBf16:
      return "bf16";
    case WireCodec::kInt8:
      return "int8";
  }
  return "unknown";
}

size_t EncodedBytes(WireCodec c, size_t n) {
  switch (c) {
    case WireCodec::kNone:
      return 4 * n;
    case WireCodec::kFp16:
    case WireCodec::kBf16:
      return 2 * n;
    case WireCodec::kInt8:
      return 4 * Int8Blocks(n) + n;
  }
  return 0;
}

void Encode(WireCodec c, const float* x, size_t n, float* residual, uint8_t* out) {
  switch (c) {
    case WireCodec::kNone:
      for (size_t i = 0; i < n; ++i) {
        const float y = residual != nullptr ? x[i] + residual[i] : x[i];
        StoreF32(out + 4 * i, y);
        if (residual != nullptr) residual[i] = 0.0f;  // sent exactly
      }
      return;
    case WireCodec::kFp16:
      Encode16(x, n, residual, out, FloatToHalf, HalfToFloat);
      return;
    case WireCodec::kBf16:
      Encode16(x, n, residual, out, FloatToBf16, Bf16ToFloat);
      return;
    case WireCodec::kInt8:
      EncodeInt8(x, n, residual, out);
      return;
  }
}

void Decode(WireCodec c, const uint8_t* in, size_t n, float* out) {
  DecodeImpl<false>(c, in, n, out);
}

void DecodeAdd(WireCodec c, const uint8_t* in, size_t n, float* acc) {
  DecodeImpl<true>(c, in, n, acc);
}

namespace {
// The floats of each rank's block in TwoStageAllReduce: ceil(n / g).
size_t TwoStageBlock(size_t n, int g) {
  return (n + static_cast<size_t>(g) - 1) / static_cast<size_t>(g);
}
}  // namespace

size_t TwoStageResidualFloats(size_t n, int g) {
  return TwoStageBlock(n, g) * (static_cast<size_t>(g) + 1);
}

size_t TwoStageWireBytes(WireCodec codec, size_t n, int g) {
  return 2 * EncodedBytes(codec, TwoStageBlock(n, g)) * (static_cast<size_t>(g) - 1);
}

absl::Status TwoStageAllReduce(WireCodec codec, int g, float* data, size_t n, float* residual,
                               TwoStageScratch& sc, const AllToAllFn& all_to_all,
                               const AllGatherFn& all_gather) {
  if (g < 1) return absl::InvalidArgumentError(absl::StrCat("TwoStageAllReduce: g = ", g));
  const size_t gs = static_cast<size_t>(g);
  const size_t block = TwoStageBlock(n, g);
  const size_t bytes = EncodedBytes(codec, block);
  sc.send.resize(bytes * gs);
  sc.recv.resize(bytes * gs);
  sc.sum.resize(block);
  sc.tail.resize(block);
  float* res1 = residual;
  float* res2 = residual != nullptr ? residual + block * gs : nullptr;
  // Block r is data[r·block, (r+1)·block); the elements of it inside data (0 when it lies
  // wholly in the padding). Full blocks are encoded from and decoded into data directly.
  auto in_data = [&](size_t r) { return r * block >= n ? 0 : std::min(block, n - r * block); };
  // Stage 1, reduce-scatter.
  for (size_t r = 0; r < gs; ++r) {
    const size_t len = in_data(r);
    const float* src = data + r * block;
    if (len < block) {
      std::copy_n(src, len, sc.tail.data());
      std::fill(sc.tail.begin() + static_cast<ptrdiff_t>(len), sc.tail.end(), 0.0f);
      src = sc.tail.data();
    }
    Encode(codec, src, block, res1 != nullptr ? res1 + r * block : nullptr,
           sc.send.data() + r * bytes);
  }
  RM_RETURN_IF_ERROR(all_to_all(sc.send.data(), sc.recv.data(), bytes));
  Decode(codec, sc.recv.data(), block, sc.sum.data());
  for (size_t r = 1; r < gs; ++r)
    DecodeAdd(codec, sc.recv.data() + r * bytes, block, sc.sum.data());
  // Stage 2, all-gather of the encoded sums (the owner keeps this stage's residual).
  uint8_t* mine = sc.send.data();  // stage 1's send buffer is free again
  Encode(codec, sc.sum.data(), block, res2, mine);
  RM_RETURN_IF_ERROR(all_gather(mine, sc.recv.data(), bytes));
  for (size_t r = 0; r < gs; ++r) {
    const size_t len = in_data(r);
    if (len == block) {
      Decode(codec, sc.recv.data() + r * bytes, block, data + r * block);
    } else if (len > 0) {
      Decode(codec, sc.recv.data() + r * bytes, block, sc.tail.data());
      std::copy_n(sc.tail.data(), len, data + r * block);
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// PowerSGD

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Standard normal values from (seed, stream) only: the same on every rank and platform (own
// generator and Box-Muller rather than the implementation-defined std::normal_distribution).
void FillNormal(uint64_t seed, uint64_t stream, float* out, size_t n) {
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (stream + 1));
  SplitMix64(state);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1p-53;  // (0, 1]
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

// a * b, or SIZE_MAX on overflow.
size_t SatMul(size_t a, size_t b) {
  size_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<size_t>::max() : r;
}

// Orthonormalises the columns of the row-major rows x r matrix `p` (r <= rows) in double:
// modified Gram-Schmidt with one re-orthogonalisation pass. A column that is zero, non-finite or
// (numerically) in the span of the previous ones is replaced by the unit vector e_k least covered
// by the previous columns, orthogonalised, so the result always has r orthonormal columns.
// `work` is scratch.
void Orthonormalise(float* p, size_t rows, size_t r, std::vector<double>& work) {
  work.resize(rows * r);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < r; ++j) work[j * rows + i] = p[i * r + j];  // column-major
  }
  auto norm = [rows](const double* v) {
    double s = 0;
    for (size_t i = 0; i < rows; ++i) s += v[i] * v[i];
    return std::sqrt(s);
  };
  auto project_out = [rows, &work](double* v, size_t j) {
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < j; ++k) {
        const double* u = &work[k * rows];
        double d = 0;
        for (size_t i = 0; i < rows; ++i) d += u[i] * v[i];
        for (size_t i = 0; i < rows; ++i) v[i] -= d * u[i];
      }
    }
  };
  constexpr double kRelTol = 1e-6;
  for (size_t j = 0; j < r; ++j) {
    double* v = &work[j * rows];
    const double n0 = norm(v);
    bool ok = std::isfinite(n0) && n0 > 0;
    double n1 = 0;
    if (ok) {
      project_out(v, j);
      n1 = norm(v);
      ok = n1 > kRelTol * n0;
    }
    if (!ok) {
      // e_k with the smallest squared mass in the previous columns: its remainder after projection
      // has squared norm >= 1 - j/rows > 0.
      size_t best = 0;
      double best_mass = std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < rows; ++i) {
        double mass = 0;
        for (size_t k = 0; k < j; ++k) mass += work[k * rows + i] * work[k * rows + i];
        if (mass < best_mass) {
          best_mass = mass;
          best = i;
        }
      }
      std::fill(v, v + rows, 0.0);
      v[best] = 1.0;
      project_out(v, j);
      n1 = norm(v);
    }
    for (size_t i = 0; i < rows; ++i) v[i] /= n1;
  }
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < r; ++j) p[i * r + j] = static_cast<float>(work[j * rows + i]);
  }
}

}  // namespace

PowerSgd::PowerSgd(std::vector<MatrixRange> matrices, size_t total, PowerSgdOptions options)
    : total_(total), options_(options) {
  if (options.rank < 1) {
    init_status_ =
        absl::InvalidArgumentError(absl::StrCat("PowerSgd: rank must be >= 1, got ", options.rank));
    return;
  }
  if (options.min_compression_rate < 0) {
    init_status_ = absl::InvalidArgumentError(absl::StrCat(
        "PowerSgd: min_compression_rate must be >= 0, got ", options.min_compression_rate));
    return;
  }
  // Validate ranges: inside [0, total), no overlaps among non-empty matrices.
  std::vector<std::pair<size_t, size_t>> intervals;  // [begin, end) of every non-empty matrix
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    size_t size;
    if (__builtin_mul_overflow(m.rows, m.cols, &size) || m.offset > total ||
        size > total - m.offset) {
      init_status_ = absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrix ", i, " (offset ", m.offset, ", ", m.rows, "x", m.cols,
                       ") does not fit in a buffer of ", total, " floats"));
      return;
    }
    if (size > 0) intervals.emplace_back(m.offset, m.offset + size);
  }
  std::sort(intervals.begin(), intervals.end());
  for (size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].first < intervals[i - 1].second) {
      init_status_ = absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrices overlap at element ", intervals[i].first));
      return;
    }
  }

  // Choose the compressed matrices (in the caller's order: the index seeds Q).
  std::vector<std::pair<size_t, size_t>> compressed_intervals;
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    const size_t r = std::min({static_cast<size_t>(options.rank), m.rows, m.cols});
    if (r == 0) continue;
    if (m.rows > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        m.cols > static_cast<size_t>(std::numeric_limits<int>::max())) {
      init_status_ = absl::InvalidArgumentError(absl::StrCat(
          "PowerSgd: matrix ", i, " is too large for BLAS (", m.rows, "x", m.cols, ")"));
      return;
    }
    const size_t size = m.rows * m.cols;
    const size_t threshold =
        SatMul(SatMul(static_cast<size_t>(options.min_compression_rate), m.rows + m.cols), r);
    if (size < threshold) continue;  // too small to gain: sent exactly
    Compressed c;
    c.index = i;
    c.offset = m.offset;
    c.rows = m.rows;
    c.cols = m.cols;
    c.rank = r;
    c.p_offset = p_floats_;
    c.q_offset = q_floats_;
    c.m_offset = m_floats_;
    m_floats_ += size;
    p_floats_ += m.rows * r;
    q_floats_ += m.cols * r;
    c.residual.assign(size, 0.0f);
    c.q.resize(m.cols * r);
    FillNormal(options.seed, i, c.q.data(), c.q.size());
    compressed_intervals.emplace_back(m.offset, m.offset + size);
    compressed_.push_back(std::move(c));
  }
  std::sort(compressed_intervals.begin(), compressed_intervals.end());
  size_t pos = 0;
  for (const auto& [begin, end] : compressed_intervals) {
    if (begin > pos) uncompressed_.push_back({pos, begin - pos});
    pos = end;
  }
  if (total > pos) uncompressed_.push_back({pos, total - pos});
  for (const Span& s : uncompressed_) uncompressed_floats_ += s.size;
}

size_t PowerSgd::wire_floats_per_call() const {
  return uncompressed_floats_ + p_floats_ + q_floats_;
}

absl::Status PowerSgd::AllReduce(float* grads, int world_size,
                                 const std::function<absl::Status(float*, size_t)>& allreduce_sum) {
  RM_RETURN_IF_ERROR(init_status_);
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSgd::AllReduce: world_size must be >= 1, got ", world_size));
  }
  if (total_ > 0 && grads == nullptr) {
    return absl::InvalidArgumentError("PowerSgd::AllReduce: grads is null");
  }
  if (!allreduce_sum) return absl::InvalidArgumentError("PowerSgd::AllReduce: no allreduce_sum");

  // Nothing is written to grads, residuals or Q until every collective has succeeded.
  // 1. Uncompressed elements, packed.
  if (uncompressed_floats_ > 0) {
    unc_buf_.resize(uncompressed_floats_);
    float* dst = unc_buf_.data();
    for (const Span& s : uncompressed_) {
      std::memcpy(dst, grads + s.offset, s.size * sizeof(float));
      dst += s.size;
    }
    RM_RETURN_IF_ERROR(allreduce_sum(unc_buf_.data(), uncompressed_floats_));
  }

  // 2. P = sum_ranks M Q, with M = G + E formed once in scratch (one GEMM per product rather
  //    than G Q + E Q: OpenBLAS copies the whole left operand to pack it, so each GEMM costs
  //    about a pass over the matrix). Grads and residuals stay untouched until the collectives
  //    have succeeded.
  p_buf_.resize(p_floats_);
  q_buf_.resize(q_floats_);
  m_buf_.resize(m_floats_);
  for (const Compressed& c : compressed_) {
    const size_t size = c.rows * c.cols;
    const float* g = grads + c.offset;
    const float* e = c.residual.data();
    float* mm = m_buf_.data() + c.m_offset;
    for (size_t k = 0; k < size; ++k) mm[k] = g[k] + e[k];
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, r, n, 1.0f, mm, n, c.q.data(), r,
                0.0f, p_buf_.data() + c.p_offset, r);
  }
  if (p_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(p_buf_.data(), p_floats_));

  // 3. Orthonormalise each P (identical input on every rank, so identical output).
  // 4. Q' = sum_ranks M^T P.
  for (const Compressed& c : compressed_) {
    float* p = p_buf_.data() + c.p_offset;
    Orthonormalise(p, c.rows, c.rank, gs_work_);
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, r, m, 1.0f, m_buf_.data() + c.m_offset,
                n, p, r, 0.0f, q_buf_.data() + c.q_offset, r);
  }
  if (q_floats_ > 0) RM_RETURN_IF_ERROR(allreduce_sum(q_buf_.data(), q_floats_));

  // 5. Commit. Uncompressed sums go back in place.
  const float* src = unc_buf_.data();
  for (const Span& s : uncompressed_) {
    std::memcpy(grads + s.offset, src, s.size * sizeof(float));
    src += s.size;
  }
  const float inv_world = 1.0f / static_cast<float>(world_size);
  for (Compressed& c : compressed_) {
    const size_t size = c.rows * c.cols;
    float* g = grads + c.offset;
    float* e = c.residual.data();
    const float* mm = m_buf_.data() + c.m_offset;
    const float* p = p_buf_.data() + c.p_offset;
    const float* q = q_buf_.data() + c.q_offset;
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
              r = static_cast<int>(c.rank);
    // grads = M^ = P Q'^T; new residual e = M - M^ / world_size.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, r, 1.0f, p, r, q, r, 0.0f, g, n);
    for (size_t k = 0; k < size; ++k) e[k] = FiniteOrZero(mm[k] - g[k] * inv_world);
    // Warm start: Q' with unit columns (same span for the next P, bounded magnitudes). A
    // non-finite Q' (a NaN/inf gradient this step) restarts from the seeded Q instead.
    bool finite = true;
    for (size_t k = 0; k < c.q.size(); ++k) finite &= std::isfinite(q[k]);
    if (!finite) {
      FillNormal(options_.seed, c.index, c.q.data(), c.q.size());
      continue;
    }
    for (size_t j = 0; j < c.rank; ++j) {
      double s = 0;
      for (size_t i = 0; i < c.cols; ++i)
        s += static_cast<double>(q[i * c.rank + j]) * q[i * c.rank + j];
      const double scale = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
      for (size_t i = 0; i < c.cols; ++i) {
        c.q[i * c.rank + j] = static_cast<float>(q[i * c.rank + j] * scale);
      }
    }
  }
  return absl::OkStatus();
}

size_t PowerSgd::held_bytes() const {
  size_t floats = unc_buf_.capacity() + p_buf_.capacity() + q_buf_.capacity() + m_buf_.capacity();
  for (const Compressed& c : compressed_) floats += c.residual.capacity() + c.q.capacity();
  return floats * sizeof(float) + gs_work_.capacity() * sizeof(double);
}

std::vector<float> PowerSgd::State() const {
  std::vector<float> s;
  size_t size = 0;
  for (const Compressed& c : compressed_) size += c.residual.size() + c.q.size();
  s.reserve(size);
  for (const Compressed& c : compressed_) {
    s.insert(s.end(), c.residual.begin(), c.residual.end());
    s.insert(s.end(), c.q.begin(), c.q.end());
  }
  return s;
}

absl::Status PowerSgd::SetState(const std::vector<float>& s) {
  RM_RETURN_IF_ERROR(init_status_);
  size_t size = 0;
  for (const Compressed& c : compressed_) size += c.residual.size() + c.q.size();
  if (s.size() != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSgd::SetState: expected ", size, " floats, got ", s.size()));
  }
  const float* src = s.data();
  for (Compressed& c : compressed_) {
    std::copy(src, src + c.residual.size(), c.residual.begin());
    src += c.residual.size();
    std::copy(src, src + c.q.size(), c.q.begin());
    src += c.q.size();
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
