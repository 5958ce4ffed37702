// Test controls of the emulator's cuBLASLt stand-in (cublaslt_emu.cc), so that code calling
// cuBLASLt can be tested against refusals a real GPU's library gives at run time:
//
//   - a cublasLtMatmul that refuses chosen heuristic candidates (the first one, or all of them)
//     with CUBLAS_STATUS_NOT_SUPPORTED, for every shape or for one (m, n, k);
//   - a heuristic that returns no algorithm for such a shape;
//   - the alignment rule of real cuBLASLt: each candidate needs every operand aligned to
//     min(16, the preference's CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES) bytes (256 when the
//     preference is not set, as cuBLASLt's default), and a call with a less aligned pointer is
//     refused (NOT_SUPPORTED) instead of computed.
//
// Set from a test through SetLtRefusals(), or from the environment (read at the first cuBLASLt
// call when no test set them):
//
//   CUDA_EMU_CUBLASLT_REFUSE=item,item,...    items: first (refuse candidate 0 at
//       cublasLtMatmul), all (refuse every candidate), none-found (the heuristic returns no
//       algorithm), aligned (enforce the alignment rule), m=<n> / n=<n> / k=<n> (limit first,
//       all and none-found to calls of that column-major dimension).
//
// Counters say which candidate ran, so a test can check that a fallback happened.
#pragma once

#include <cstdint>
#include <string>

namespace cuda_emu::blas {

// The number of distinct candidates the stand-in's heuristic offers (each computes the same
// product; they differ only in their index and alignment requirement).
inline constexpr int kLtCandidates = 4;

struct LtRefusals {
  uint32_t refuse_algos = 0;  // bit i: cublasLtMatmul refuses candidate i
  bool none_found = false;    // the heuristic returns 0 results
  bool enforce_alignment = false;
  int64_t only_m = -1, only_n = -1, only_k = -1;  // -1: any
};

struct LtCounters {
  int64_t runs[kLtCandidates] = {};  // products computed, by candidate index
  int64_t refused_algo = 0;          // calls refused because their candidate was refused
  int64_t refused_alignment = 0;     // calls refused for a misaligned operand
  int64_t heuristic_none = 0;        // heuristic queries answered with no algorithm
};

// Replaces the refusals (and stops the environment from being read) and zeroes the counters.
void SetLtRefusals(const LtRefusals& r);
LtRefusals GetLtRefusals();
LtCounters GetLtCounters();

// Parses CUDA_EMU_CUBLASLT_REFUSE's syntax; false (with *error) on an unknown item.
bool ParseLtRefusals(const std::string& text, LtRefusals* out, std::string* error);

// For cublaslt_emu.cc: one call counted (a product run by `candidate`, or a refusal).
void CountLt(int candidate, bool refused_algo, bool refused_alignment, bool heuristic_none);

}  // namespace cuda_emu::blas
