// File: tools/io/plan_buffers.h
//
// Plans held by someone else: the five int32 buffers of get_mla_metadata_v1 as an engine, a numpy
// array or a captured .npy holds them (aiter-mla-metadata.md §3.2), turned into a ref::Plan for
// the plan checker, and compared with mlasim's re-plan of the same request: the first diverging
// buffer and element, and the host decisions (§4.1: clusters, head folding, q tiles, dispatch)
// that explain the difference. Used by `mlasim check` and the Python bindings (check_plan).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ref/metadata.h"
#include "ref/status.h"

namespace mlasim::io {

// A read-only view of one int32 buffer: `size` elements at `data` (work_info: rows * 8,
// reduce_final_map: rows * 2). Not owned.
struct Int32View {
  const int32_t* data = nullptr;
  int64_t size = 0;
};

struct PlanBufferViews {
  Int32View work_indptr;         // [num_clusters + 1] (aiter: max_splits + 1)
  Int32View work_info;           // [rows * 8], MlaWorkInfo rows
  Int32View reduce_indptr;       // [tile_cnt + 1]
  Int32View reduce_final_map;    // [tile_cnt * 2]
  Int32View reduce_partial_map;  // [max_split_tiles]
};

// The names of the five buffers, in the order of PlanBufferViews and of reports.
const std::vector<std::string>& PlanBufferNames();

// mlasim's poison (ref::Plan::kPoison, 0xA5A5A5A5): the value of cells no planner wrote in
// mlasim's own plans and .npy files. Engines that fill their plan buffers with it before planning
// let the checker tell unwritten cells from written ones.
inline constexpr int32_t kDefaultUnwrittenValue = ref::Plan::kPoison;

// A ref::Plan holding copies of the buffers, for ref::CheckPlan and DiffPlans. Sizes come from
// the views; `derived` is DecidePlan(request, choice) with num_works = work_indptr[num_clusters]
// when that entry exists. Cells are kWritten except those equal to `unwritten_value`
// (kUnwritten). Errors (InvalidArgument, field = buffer name): a null view with size > 0,
// work_info not a multiple of 8 or reduce_final_map not a multiple of 2 elements, a buffer above
// 2^31 - 1 elements; DecidePlan's errors.
StatusOr<ref::Plan> PlanFromBuffers(const ref::PlanRequest& request, const PlanBufferViews& views,
                                    std::optional<int32_t> unwritten_value,
                                    ref::PlannerChoice choice = ref::PlannerChoice::kAiterDispatch);

// Element counts of a plan's buffers, as the sizes a re-plan should use.
ref::MetadataSizes SizesOf(const ref::Plan& plan);

struct PlanCellDifference {
  std::string buffer;    // "work_info"
  int64_t index = -1;    // flat element
  int64_t row = -1;      // work_info / reduce_final_map row, else -1
  int32_t field = -1;    // work_info dword (ref::WorkField) or reduce_final_map column, else -1
  int32_t captured = 0;  // the value held by the captured buffer
  bool captured_unwritten = false;  // the captured cell holds the unwritten value
  int32_t replanned = 0;            // the value mlasim's planner writes
  std::string text;  // "work_info[3].kv_end (element 29): captured 580, re-planned 600"
};

struct PlanStorePastEnd {
  std::string buffer;
  int64_t stores = 0;  // elements the re-plan stores past the captured buffer's end
  int64_t first_index = -1;
  int64_t captured_size = 0;
};

struct PlanDiff {
  int64_t cells_compared = 0;  // cells the re-plan writes that the captured buffers hold
  int64_t cells_differing = 0;
  std::optional<PlanCellDifference> first;        // in buffer order, then element order
  std::vector<PlanStorePastEnd> stores_past_end;  // the captured buffer is too small (class D)
  bool identical() const { return cells_differing == 0 && stores_past_end.empty(); }
};

// Compares every cell `replanned` wrote (Cell::kWritten; undefined cells are skipped) with the
// same cell of `captured`; `replanned` must be planned into `captured`'s sizes (SizesOf) so that
// stores past a captured buffer's end show as stores_past_end.
PlanDiff DiffPlans(const ref::Plan& captured, const ref::Plan& replanned);

// One host decision (§4.1) in two plans.
struct DecisionDifference {
  std::string name;  // "num_clusters", "fold_ratio", "parallel_planner_used", ...
  int64_t captured = 0;
  int64_t replanned = 0;
  std::string text;  // "num_clusters: captured 80, re-planned 304"
};

// The decisions of ref::PlanDerived by name, in report order (the golden corpus's `derived`
// names): num_clusters, fold_ratio, packed_qo_len_per_wg, qo_split, parallel_planner_used,
// num_splits, planner_batches, planner_heads, topk_pages, fixed_overhead_blocks,
// tail_done_threshold, num_works, payload.
std::vector<std::pair<std::string, int64_t>> DecisionValues(const ref::PlanDerived& derived);

// Decisions visible in the captured buffers themselves: num_clusters (work_indptr entries - 1:
// the launchers' grid, caller obligation (1) of §2) and num_works (work_indptr[num_clusters]).
std::vector<DecisionDifference> ObservedDecisionDifferences(const ref::Plan& captured,
                                                            const ref::Plan& replanned);

// A changed planner input that makes mlasim's re-plan equal the captured buffers.
struct Reproduction {
  std::string input;  // "cu_count", "planner", "q_dtype/kv_dtype", "revision"
  std::string value;  // "80", "serial", "fp8/fp8", "2026-03"
  std::string was;    // the captured request's value
  std::vector<DecisionDifference> decisions;  // re-plan with the change vs the re-plan without
};

// Checks a request before it is planned (mlasim's limits, tools/mlasim/plan_input.h); the caller
// supplies it so that this library reads the same limits table as the CLI.
using RequestLimitCheck = std::function<Status(const ref::PlanRequest&, const ref::PlanDerived&)>;

// Tries, in order, the inputs an engine most often gets wrong (aiter-mla-metadata.md §2, caller
// obligations): cu_count (from the captured work_indptr's length), the other planner dispatch,
// q/kv dtypes (bf16, fp8: the native-vs-fold decision), the other revision. Returns the first
// whose re-plan (into the captured sizes) is identical to the captured buffers, or nullopt.
// Each candidate passes `limits` first. `choice` is the planner choice of the failed re-plan.
std::optional<Reproduction> FindReproducingInput(const ref::PlanRequest& request,
                                                 ref::PlannerChoice choice,
                                                 const ref::Plan& captured,
                                                 const ref::Plan& replanned,
                                                 const RequestLimitCheck& limits);

}  // namespace mlasim::io
