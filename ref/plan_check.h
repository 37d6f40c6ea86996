// File: ref/plan_check.h
//
// The plan checker: every invariant of aiter-mla-metadata.md §5, checked against the request the
// plan is meant to serve, with one precise diagnostic per broken invariant (not a bool).
#pragma once

#include <string>
#include <vector>

#include "ref/enum_names.h"
#include "ref/metadata.h"

namespace mlasim::ref {

enum class PlanDiag : uint8_t {
  kWorkIndptrShape,          // shorter than num_clusters + 1, unwritten, or not starting at 0
  kWorkIndptrDecreasing,     // work_indptr[c+1] < work_indptr[c]
  kWorkCountExceedsSizing,   // more work rows than get_mla_metadata_info_v1 allocated
  kWorkRowUnwritten,         // a row below work_indptr[num_clusters] was never written
  kWorkOutsideRequest,       // a work's q rows belong to no q tile of the request (class A)
  kWorkBatchMismatch,        // batch_idx is not the tile's batch
  kTilePiecesScattered,      // a tile's pieces are not consecutive work items
  kTileKvNotCovered,         // pieces leave a gap, overlap, or miss the tile's KV range
  kTileWithoutWork,          // a tile got no work item: its output rows are never written
  kTileEmptyKvRange,         // the tile's causal KV range is empty or negative (q rows see no key)
  kKvOffsetMismatch,         // kv_offset disagrees with the piece's distance to the request end
  kPieceShorterThanQlen,     // page 1 split tile: a piece leaves < max_seqlen_qo tokens after it
  kReduceIndptrInvalid,      // not written, not monotone, or a group of size 1
  kReduceGroupMismatch,      // a split tile's reduce group does not list exactly its pieces
  kReduceFinalMapMismatch,   // reduce_final_map row of a split tile is not (qo_start, qo_end)
  kPartialRowsOverlap,       // two pieces share a partial row
  kPartialRowsExceedLogits,  // a partial row past reduce_partial_map.size * max_seqlen_qo
  kBufferOverflow,           // the planner stored past a buffer's end (sizing disagreement)
  kInputReadOutOfRange,      // the planner read its own input past the end
  kUpdateFoldMismatch,       // decode_update folded heads differently from the planner
  kUpdateLeftEmptyPiece,     // decode_update left a zero-length piece although the request grew
  kZeroClusters,             // the planner has no cluster (CUs / KV heads = 0): nothing runs
  kLaunchReadsPastBuffer,    // a workgroup of the launch reads work_indptr past its end
  kLaunchReadsUnwritten,     // a workgroup reads a work_indptr entry no planner wrote
  kLaunchSkipsWork,          // fewer workgroups than clusters: some work items never run
};
inline constexpr EnumName<PlanDiag> kPlanDiagNames[] = {
    {PlanDiag::kWorkIndptrShape, "work_indptr_shape"},
    {PlanDiag::kWorkIndptrDecreasing, "work_indptr_decreasing"},
    {PlanDiag::kWorkCountExceedsSizing, "work_count_exceeds_sizing"},
    {PlanDiag::kWorkRowUnwritten, "work_row_unwritten"},
    {PlanDiag::kWorkOutsideRequest, "work_outside_request"},
    {PlanDiag::kWorkBatchMismatch, "work_batch_mismatch"},
    {PlanDiag::kTilePiecesScattered, "tile_pieces_scattered"},
    {PlanDiag::kTileKvNotCovered, "tile_kv_not_covered"},
    {PlanDiag::kTileWithoutWork, "tile_without_work"},
    {PlanDiag::kTileEmptyKvRange, "tile_empty_kv_range"},
    {PlanDiag::kKvOffsetMismatch, "kv_offset_mismatch"},
    {PlanDiag::kPieceShorterThanQlen, "piece_shorter_than_qlen"},
    {PlanDiag::kReduceIndptrInvalid, "reduce_indptr_invalid"},
    {PlanDiag::kReduceGroupMismatch, "reduce_group_mismatch"},
    {PlanDiag::kReduceFinalMapMismatch, "reduce_final_map_mismatch"},
    {PlanDiag::kPartialRowsOverlap, "partial_rows_overlap"},
    {PlanDiag::kPartialRowsExceedLogits, "partial_rows_exceed_logits"},
    {PlanDiag::kBufferOverflow, "buffer_overflow"},
    {PlanDiag::kInputReadOutOfRange, "input_read_out_of_range"},
    {PlanDiag::kUpdateFoldMismatch, "update_fold_mismatch"},
    {PlanDiag::kUpdateLeftEmptyPiece, "update_left_empty_piece"},
    {PlanDiag::kZeroClusters, "zero_clusters"},
    {PlanDiag::kLaunchReadsPastBuffer, "launch_reads_past_buffer"},
    {PlanDiag::kLaunchReadsUnwritten, "launch_reads_unwritten"},
    {PlanDiag::kLaunchSkipsWork, "launch_skips_work"}};
const char* PlanDiagName(PlanDiag d);

enum class Severity : uint8_t {
  kError,    // an invariant is broken: a kernel consuming the plan misbehaves
  kWarning,  // legal for aiter but hazardous downstream (e.g. output rows never written)
};
inline constexpr EnumName<Severity> kSeverityNames[] = {{Severity::kError, "error"},
                                                        {Severity::kWarning, "warning"}};
const char* SeverityName(Severity s);

struct PlanDiagnostic {
  PlanDiag code;
  Severity severity = Severity::kError;
  std::string buffer;   // the buffer concerned ("work_info", "reduce_indptr", ...)
  int64_t index = -1;   // element or row, -1 when not applicable
  int32_t tile = -1;    // q tile in planning order, -1 when not applicable
  int32_t work = -1;    // work item, -1 when not applicable
  std::string message;  // full sentence with the values involved
};

struct PlanCheckReport {
  std::vector<PlanDiagnostic> diagnostics;
  bool ok() const;  // no kError diagnostics
  int64_t count(PlanDiag code) const;
  std::string ToString() const;  // one line per diagnostic
};

// One q tile the request implies, in planning order (§4.3, §4.5).
struct ExpectedTile {
  int32_t v = 0;            // virtual batch
  int32_t tile = 0;         // q tile within v
  int32_t batch_idx = 0;    // what work_info.batch_idx must hold
  int32_t q0 = 0, q1 = 0;   // q rows [q0, q1)
  int32_t kv_begin = 0;     // first KV position (planner space, pages)
  int32_t kv_full_end = 0;  // request end (ke)
  int32_t kv_end = 0;       // end after the causal trim (ke - bt, page size 1)
  int32_t request = 0;      // real request
};

// The tiles `request` implies under the decisions in `derived` (fold ratio, pack, q split).
std::vector<ExpectedTile> ExpectedTiles(const PlanRequest& request, const PlanDerived& derived);

// What CheckPlan reports: every diagnostic, or its errors alone (the simulator's executor, which
// reports nothing else: the warnings' sentences are then not made).
enum class PlanCheckScope : uint8_t { kAll, kErrors };

// Checks `plan` against the request it must serve. For a plan updated by decode_update, pass the
// request of the new step (new kv_indptr, max_seqlen_qo = uni_seqlen_qo = 1). The plan must
// carry its write state (CellTracking::kChecked, the default): asserted. With kErrors the report
// is kAll's without its Severity::kWarning diagnostics, in the same order.
PlanCheckReport CheckPlan(const PlanRequest& request, const Plan& plan,
                          PlanCheckScope scope = PlanCheckScope::kAll);

// The grid aiter's ASM and OPUS launchers use: work_indptr.size(0) - 1 workgroups
// (aiter-mla-metadata.md §10, "ASM launch"; §2 "caller obligations").
int64_t AiterLaunchGrid(const Plan& plan);

// Checks `plan` against a launch of the decode kernel with `workgroups` workgroups (>= 1).
// Workgroup c reads work_indptr[c] and work_indptr[c + 1] and runs work items
// [work_indptr[c], work_indptr[c + 1]) (§11.1). Errors: kLaunchReadsPastBuffer (an entry past
// work_indptr's end), kLaunchReadsUnwritten (an entry no planner wrote: stale memory on a GPU),
// kLaunchSkipsWork (workgroups < num_clusters and the clusters left without one hold work
// items; a warning when they hold none). One diagnostic per kind, with the first and last
// entry. Needs a plan with its write state (CellTracking::kChecked).
PlanCheckReport CheckLaunchGrid(const Plan& plan, int64_t workgroups);

}  // namespace mlasim::ref
