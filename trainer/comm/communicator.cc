#include "trainer/comm/communicator.h"

#include "absl/strings/str_format.h"

namespace ringmaster::trainer {

const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat16:
      return "fp16";
    case DataType::kInt8:
      return "int8";
    case DataType::kBytes:
      return "bytes";
  }
  return "unknown";
}

absl::Status CheckSummable(const char* backend, const char* op, int rank, DataType type) {
  if (IsSummable(type)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s %s on rank %d: cannot sum elements of type %s (raw bytes have no "
                      "arithmetic; use fp32, bf16, fp16 or int8)",
                      backend, op, rank, DataTypeName(type)));
}

}  // namespace ringmaster::trainer
