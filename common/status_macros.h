// Propagation helpers for absl::Status / absl::StatusOr across module boundaries.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RM_CONCAT_INNER(a, b) a##b
#define RM_CONCAT(a, b) RM_CONCAT_INNER(a, b)

// Returns from the enclosing function when `expr` is not OK.
#define RM_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status rm_status_ = (expr);      \
    if (!rm_status_.ok()) return rm_status_; \
  } while (0)

// `RM_ASSIGN_OR_RETURN(auto x, MakeX());` — binds the value or returns the error.
#define RM_ASSIGN_OR_RETURN(lhs, expr) \
  RM_ASSIGN_OR_RETURN_IMPL(RM_CONCAT(rm_statusor_, __LINE__), lhs, expr)
#define RM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
