// What bench_kernels' parts share (bench_kernels.cc, bench_codecs.cc): the shapes, the stream,
// the rows recorded so far, and recording a validated row with its timing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "jobspec/bert_config.h"
#include "trainer/cuda/bench/bench_kernels_util.h"

namespace ringmaster::trainer::cuda::bench {

struct Ctx {
  int B = 32, S = 128, H = 768, NH = 12, I = 3072, C = 2, T = 2;
  BertConfig model;  // AdamW and the gradient norm run over its parameter count
  bool timed = true;
  double target_ms = 50;
  cudaStream_t stream = nullptr;
  std::vector<Row> rows;
  size_t N() const { return static_cast<size_t>(B) * S; }
};

using Launch = std::function<void(cudaStream_t)>;

// Times `launch` (unless validate-only) and records the row.
inline void Record(Ctx& c, Row row, const Launch& launch) {
  if (c.timed) row.ms = TimeMs(launch, c.stream, c.target_ms);
  c.rows.push_back(std::move(row));
}

// "(a,b,...)" for the shape column.
inline std::string Dims(std::initializer_list<int64_t> v) {
  std::string s;
  for (int64_t x : v) s += absl::StrFormat("%s%d", s.empty() ? "(" : ",", x);
  return s + ")";
}

// bench_codecs.cc: the gradient-compression kernels of the multi-GPU path.
void BenchCodecs(Ctx& c);    // kernels/wire_codec.h: encode (int8 with error feedback), decode-add
void BenchPowerSgd(Ctx& c);  // powersgd_kernels.h on an FFN weight's gradient

}  // namespace ringmaster::trainer::cuda::bench
