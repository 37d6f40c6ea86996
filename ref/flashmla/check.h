// File: ref/flashmla/check.h
//
// The FlashMLA scheduler-plan checker: reads a plan (rows + num_splits) the way FlashMLA's
// consumers do and reports every broken invariant with a typed code.
//   split-KV decode: sm90 dense (9241ae3 csrc/sm90/decode/dense/splitkv_mla.cuh; 414a2f3
//     flash_fwd_splitkv_mla_kernel) and sm90 sparse fp8 (9241ae3 sparse_fp8/splitkv_mla.cuh):
//     a row with begin_req_idx >= b is skipped; request `r` in [begin, end] is decoded over
//     blocks [r == begin ? begin : 0, r == end ? end : blocks(r)), into the output directly
//     ("no split") or into accumulator row num_splits[r] + (r == begin ? begin_split_idx : 0).
//   combine: a request with num_splits[r+1] - num_splits[r] == 1 is skipped (already written);
//     otherwise its splits are merged, at most the instantiated bucket (MLA_NUM_SPLITS_SWITCH).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/flashmla/sched.h"

namespace mlasim::ref::flashmla {

enum class SchedDiag : uint8_t {
  kRowCount,                // rows.size() != num_sm_parts
  kNumSplitsShape,          // num_splits has not b + 1 entries, or num_splits[0] != 0
  kNumSplitsNotIncreasing,  // num_splits[r+1] <= num_splits[r]: request r owns no split
  kRowRequestRange,         // a decoded row (begin < b) with end_req_idx >= b or < begin_req_idx
  kRequestNotConsumed,      // a request no row decodes, or its pieces stop short of its end
  kPieceGapOrOverlap,       // a piece does not start where the request's previous piece ended
  kPiecePastRange,          // a piece reads blocks past its request's last block
  kEmptyPiece,              // a piece of a non-empty request covers no block (empty split)
  kSplitCountMismatch,      // the request's piece count != num_splits[r+1] - num_splits[r]
  kSplitIndexMismatch,      // a piece's split index is not its ordinal among the request's pieces
  kSplitFlagMismatch,       // the no-split decision disagrees with the request's piece count
  kSplitsExceedAccum,       // an accumulator row >= b + num_sm_parts (lse_accum / o_accum rows)
  kSplitsExceedCombine,     // a request has more splits than the combine kernel's bucket
};
const char* SchedDiagName(SchedDiag d);

struct SchedDiagnostic {
  SchedDiag code;
  int32_t row = -1;      // scheduler row, -1 when not applicable
  int32_t request = -1;  // request, -1 when not applicable
  std::string message;   // full sentence with the values involved
};

struct SchedCheckReport {
  std::vector<SchedDiagnostic> diagnostics;
  bool ok() const { return diagnostics.empty(); }
  int64_t count(SchedDiag code) const;
  std::string ToString() const;  // one line per diagnostic
};

// Capacities the plan is consumed under; 0 takes the default.
struct SchedCheckLimits {
  int32_t accum_rows = 0;          // default b + num_sm_parts (the API's accumulators)
  int32_t combine_max_splits = 0;  // default CombineMaxSplits(num_sm_parts) (32..160)
};

// KV blocks request `r` spans as the decode kernel counts them (dense: ceil(seqlen / block);
// sparse 9241ae3: max(ceil(topk_length / 64), 1) + ceil(extra_topk_length / 64)).
// `input` must have passed ValidateSchedInput.
std::vector<int32_t> ConsumerBlocks(const SchedInput& input);

// Checks `plan` (rows and num_splits, any revision's meaning per input.revision) against the
// launch it was made for. `input` must pass ValidateSchedInput (MLASIM_ASSERT otherwise); the
// plan may be anything, including hand-broken.
SchedCheckReport CheckSchedMeta(const SchedInput& input, const SchedMeta& plan,
                                const SchedCheckLimits& limits = {});

}  // namespace mlasim::ref::flashmla
