// PowerSGD with sum semantics over a caller-given all-reduce (powersgd.h).
#include "trainer/parallel/powersgd.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

// As in wire_codec.cc: clang contracts nothing into FMAs here either (GCC's default applies).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace ringmaster::trainer {

namespace {

inline float FiniteOrZero(float v) { return std::isfinite(v) ? v : 0.0f; }

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

void PowerSgdInitialQ(uint64_t seed, size_t index, float* q, size_t n) {
  FillNormal(seed, index, q, n);
}

void PowerSgdOrthonormalise(float* p, size_t rows, size_t r, std::vector<double>& work) {
  Orthonormalise(p, rows, r, work);
}

bool PowerSgdWarmStart(const float* q_new, size_t cols, size_t r, float* q) {
  for (size_t k = 0; k < cols * r; ++k) {
    if (!std::isfinite(q_new[k])) return false;
  }
  for (size_t j = 0; j < r; ++j) {
    double s = 0;
    for (size_t i = 0; i < cols; ++i) s += static_cast<double>(q_new[i * r + j]) * q_new[i * r + j];
    const double scale = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
    for (size_t i = 0; i < cols; ++i) q[i * r + j] = static_cast<float>(q_new[i * r + j] * scale);
  }
  return true;
}

absl::StatusOr<PowerSgdPlan> PlanPowerSgd(const std::vector<MatrixRange>& matrices, size_t total,
                                          const PowerSgdOptions& options) {
  if (options.rank < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSgd: rank must be >= 1, got ", options.rank));
  }
  if (options.min_compression_rate < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSgd: min_compression_rate must be >= 0, got ", options.min_compression_rate));
  }
  // Validate ranges: inside [0, total), no overlaps among non-empty matrices.
  std::vector<std::pair<size_t, size_t>> intervals;  // [begin, end) of every non-empty matrix
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    size_t size;
    if (__builtin_mul_overflow(m.rows, m.cols, &size) || m.offset > total ||
        size > total - m.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrix ", i, " (offset ", m.offset, ", ", m.rows, "x", m.cols,
                       ") does not fit in a buffer of ", total, " floats"));
    }
    if (size > 0) intervals.emplace_back(m.offset, m.offset + size);
  }
  std::sort(intervals.begin(), intervals.end());
  for (size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].first < intervals[i - 1].second) {
      return absl::InvalidArgumentError(
          absl::StrCat("PowerSgd: matrices overlap at element ", intervals[i].first));
    }
  }
  // Choose the compressed matrices (in the caller's order: the index seeds Q).
  PowerSgdPlan plan;
  std::vector<std::pair<size_t, size_t>> compressed_intervals;
  for (size_t i = 0; i < matrices.size(); ++i) {
    const MatrixRange& m = matrices[i];
    const size_t r = std::min({static_cast<size_t>(options.rank), m.rows, m.cols});
    if (r == 0) continue;
    if (m.rows > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        m.cols > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PowerSgd: matrix ", i, " is too large for BLAS (", m.rows, "x", m.cols, ")"));
    }
    const size_t size = m.rows * m.cols;
    const size_t threshold =
        SatMul(SatMul(static_cast<size_t>(options.min_compression_rate), m.rows + m.cols), r);
    if (size < threshold) continue;  // too small to gain: sent exactly
    plan.compressed.push_back({i, m.offset, m.rows, m.cols, r});
    compressed_intervals.emplace_back(m.offset, m.offset + size);
  }
  std::sort(compressed_intervals.begin(), compressed_intervals.end());
  size_t pos = 0;
  for (const auto& [begin, end] : compressed_intervals) {
    if (begin > pos) plan.uncompressed.push_back({pos, begin - pos});
    pos = end;
  }
  if (total > pos) plan.uncompressed.push_back({pos, total - pos});
  for (const auto& span : plan.uncompressed) plan.uncompressed_floats += span.second;
  return plan;
}

PowerSgd::PowerSgd(std::vector<MatrixRange> matrices, size_t total, PowerSgdOptions options)
    : total_(total), options_(options) {
  absl::StatusOr<PowerSgdPlan> plan = PlanPowerSgd(matrices, total, options);
  if (!plan.ok()) {
    init_status_ = plan.status();
    return;
  }
  for (const PowerSgdMatrixPlan& m : plan->compressed) {
    Compressed c;
    c.index = m.index;
    c.offset = m.offset;
    c.rows = m.rows;
    c.cols = m.cols;
    c.rank = m.rank;
    c.p_offset = p_floats_;
    c.q_offset = q_floats_;
    c.m_offset = m_floats_;
    m_floats_ += m.rows * m.cols;
    p_floats_ += m.rows * m.rank;
    q_floats_ += m.cols * m.rank;
    c.residual.assign(m.rows * m.cols, 0.0f);
    c.q.resize(m.cols * m.rank);
    FillNormal(options.seed, m.index, c.q.data(), c.q.size());
    compressed_.push_back(std::move(c));
  }
  for (const auto& [offset, size] : plan->uncompressed) uncompressed_.push_back({offset, size});
  uncompressed_floats_ = plan->uncompressed_floats;
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
    if (!PowerSgdWarmStart(q, c.cols, c.rank, c.q.data())) {
      FillNormal(options_.seed, c.index, c.q.data(), c.q.size());
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
