// File: ref/indptr.h
//
// The one check of an indptr array (issue 10 §6): a cumulative offsets array of B+1 entries,
// request b owning [v[b], v[b+1]). Used by the planner's request validation (qo_indptr,
// kv_indptr: aiter-mla-metadata.md §3.1), the numerics reference (ref/attention.cpp) and every
// parser that reads one. Rules that differ between callers are options, not copies.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ref/status.h"

namespace mlasim::ref {

struct IndptrRule {
  // Empty is an error (B+1 >= 1 entries); otherwise an empty array is accepted as "absent".
  bool required = true;
  // v[0] must be 0 (a buffer's own offsets); otherwise any v[0] >= 0 (aiter's planner reads
  // offsets relative to v[0], e.g. a slice of a larger kv_indptr).
  bool starts_at_zero = false;
};

// Checks that `v` is an indptr under `rule`: non-empty (if required), v[0] >= 0 (== 0 if
// starts_at_zero) and non-decreasing. Errors: InvalidArgument naming "<name>" (empty),
// "<name>[0]" or the first "<name>[i]" that decreases, with the values.
Status CheckIndptr(const std::vector<int32_t>& v, std::string_view name, IndptrRule rule = {});

}  // namespace mlasim::ref
