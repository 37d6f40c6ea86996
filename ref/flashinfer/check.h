// File: ref/flashinfer/check.h
//
// The FlashInfer MLAPlan checker: reads an MLAPlanResult the way the MLA kernels consume it
// (fa3 mla_hopper.cuh, fa2 mla.cuh, fb28d72) and reports every broken invariant with a typed
// code. The kernels run, per cluster c, works [work_indptr[c], work_indptr[c+1]): request
// (q_indptr, q_len, kv_indptr, kv_len), packed q rows [q_start, q_start + tile) and KV tokens
// [kv_start, kv_end) (further trimmed by the causal mask), writing the final output directly
// (partial_indptr == -1) or partial rows [partial_indptr, + tile rows). After a grid sync each
// merge entry folds the partial rows of a split tile into the final output.
// The checker derives what must be covered from the input alone, not from the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/flashinfer/mla_plan.h"

namespace mlasim::ref::flashinfer {

enum class MLAPlanDiag : uint8_t {
  kLaunchShape,                // num_blks_x not 1 or 2, or num_blks_y != num_sm / num_blks_x
  kWorkIndptrShape,            // not num_clusters + 1 entries, [0] != 0, or end != work count
  kWorkIndptrDecreasing,       // work_indptr[c+1] < work_indptr[c]
  kWorkListLength,             // a work list's length differs from q_indptr's
  kWorkCountExceedsCapacity,   // more works than a 16384-entry region holds (class D)
  kWorkUnknownRequest,         // (q_indptr, q_len, kv_indptr, kv_len) is no request of the batch
  kQStartInvalid,              // q_start is not the first row of a q tile of the request
  kTileWithoutWork,            // a q tile no work covers: its output rows are never written
  kTileNotCovered,             // a tile's KV chunks leave a gap or overlap, or stop too early
  kKvPastRange,                // kv_start < 0, kv_start > kv_end, or kv_end > kv_len
  kKvPastPages,                // kv_len > pages * page_size: reads past the request's pages
  kPartialMismatch,            // a split tile's work without partial rows, or a lone work with
  kPartialRowsOverlap,         // two works share partial rows
  kPartialRowsExceedCapacity,  // partial rows past the partial_o / partial_lse regions
  kMergeListLength,            // a merge list does not have num_sm entries
  kMergeRowsMismatch,          // a split tile's rows not merged exactly once, or a stray merge
  kMergePartialMismatch,       // a merge's partial start / end / stride disagree with the works
};
const char* MLAPlanDiagName(MLAPlanDiag d);

struct MLAPlanDiagnostic {
  MLAPlanDiag code;
  int64_t index = -1;    // work or merge entry, -1 when not applicable
  int32_t request = -1;  // request, -1 when not applicable
  std::string message;   // full sentence with the values involved
};

struct MLAPlanCheckReport {
  std::vector<MLAPlanDiagnostic> diagnostics;
  bool ok() const { return diagnostics.empty(); }
  int64_t count(MLAPlanDiag code) const;
  std::string ToString() const;
};

struct MLAPlanCheckOptions {
  int32_t page_size = 0;  // tokens per page for the page check; 0 skips it
};

// Checks `plan` against the input it was made for. `input` must pass ValidateMLAPlanInput
// (MLASIM_ASSERT otherwise); the plan may be anything, including hand-broken.
MLAPlanCheckReport CheckMLAPlan(const MLAPlanInput& input, const MLAPlanResult& plan,
                                const MLAPlanCheckOptions& options = {});

}  // namespace mlasim::ref::flashinfer
