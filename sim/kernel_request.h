// File: sim/kernel_request.h
//
// The request as the decode kernel addresses q, shared by `mlasim numerics`, `replay --gpu` and
// the kernel-under-test harness (fuzz/kut_check*.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "ref/planner.h"

namespace mlasim::sim {

// Dense plans tile uni_seqlen_qo rows per request, padding included, so qo_indptr is made
// uniform (the engine's T1 request lists 0 rows for padding, which the planner ignores);
// per-token (sparse) requests are returned unchanged. KernelQoIndptr writes that qo_indptr
// alone (the executor's `qo_indptr[b]` loads, docs/contracts.md).
inline void KernelQoIndptr(const ref::PlanRequest& r, std::vector<int32_t>* out) {
  if (r.topk < 0 && r.uni_seqlen_qo > 0 && !r.kv_indptr.empty()) {
    out->resize(r.kv_indptr.size());
    for (size_t b = 0; b < out->size(); ++b) (*out)[b] = static_cast<int32_t>(b) * r.uni_seqlen_qo;
  } else {
    *out = r.qo_indptr;
  }
}
inline ref::PlanRequest KernelRequest(const ref::PlanRequest& r) {
  ref::PlanRequest out = r;
  KernelQoIndptr(r, &out.qo_indptr);
  return out;
}

// First q row of the padding requests (requests >= real_requests) of `r` (in the layout of
// KernelRequest); INT64_MAX when every request is real. The engine discards rows from there on:
// their outputs are not compared.
inline int64_t FirstPaddingRow(const ref::PlanRequest& r, int32_t real_requests) {
  const int32_t batch = static_cast<int32_t>(r.qo_indptr.size()) - 1;
  if (real_requests >= batch || real_requests < 0) return std::numeric_limits<int64_t>::max();
  return r.qo_indptr[real_requests];
}

}  // namespace mlasim::sim
