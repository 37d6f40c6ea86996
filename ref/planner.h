// File: ref/planner.h
//
// get_mla_metadata_v1 in fast mode: aiter's v1.2 planner (serial kn_get_mla_metadata_v1_2 and
// parallel kn_get_mla_metadata_v1_2_parallel) with the host-side decisions of
// get_mla_metadata_v1_2_device, bit-exact with aiter at the modelled revision.
//
//   PlanRequest --ValidatePlanRequest--> DecidePlan (clusters, folding, pack, dispatch)
//               --GetMlaMetadataInfoV1--> buffers sized as a caller would allocate them
//               --serial or parallel walk--> Plan (values + per-element write state)
//
// Sources: aiter-mla-metadata.md §3 (inputs/outputs), §4 (planner), §8.1 (sparse), §16
// (revisions); the golden corpus README (parallel dispatch, folded last-page reads).
#pragma once

#include "ref/enum_names.h"
#include "ref/metadata.h"

namespace mlasim::ref {

// Deliberately broken planner variants. Each exists so that a property can be shown to fail
// on it (a property that no mutant fails proves nothing). kNone is the real planner.
enum class PlannerMutant : uint8_t {
  kNone = 0,
  kNoTailRule,            // drops the page-size-1 tail rule (aiter #2106)
  kPartialMapOffByOne,    // reduce_partial_map entries shifted by one q tile
  kUndersizedPartialMap,  // sizing allocates one reduce_partial_map entry per tile only
  kDropLastPiece,         // a split tile loses its final piece (KV not covered)
  kNondeterministicPad,   // leaks a call counter into the pad dword (not deterministic)
  kRaggedRowsByMax,       // non-uniform q: request v's rows placed at v x max_seqlen_qo
  kCount,
};
inline constexpr EnumName<PlannerMutant> kPlannerMutantNames[] = {
    {PlannerMutant::kNone, "none"},
    {PlannerMutant::kNoTailRule, "planner-no-tail-rule"},
    {PlannerMutant::kPartialMapOffByOne, "planner-partial-map-off-by-one"},
    {PlannerMutant::kUndersizedPartialMap, "sizing-undersized-partial-map"},
    {PlannerMutant::kDropLastPiece, "planner-drop-last-piece"},
    {PlannerMutant::kNondeterministicPad, "planner-leaks-state-into-pad"},
    {PlannerMutant::kRaggedRowsByMax, "planner-ragged-rows-by-max"}};
const char* PlannerMutantName(PlannerMutant m);
// Errors: InvalidArgument(field, "unknown planner mutant '...' (expected none, ...)").
StatusOr<PlannerMutant> ParsePlannerMutant(std::string_view text, std::string_view field);

// "auto" (aiter's dispatch), "serial", "parallel".
inline constexpr EnumName<PlannerChoice> kPlannerChoiceNames[] = {
    {PlannerChoice::kAiterDispatch, "auto"},
    {PlannerChoice::kSerial, "serial"},
    {PlannerChoice::kParallel, "parallel"}};
const char* PlannerChoiceName(PlannerChoice choice);
// Errors: InvalidArgument(field, "unknown planner '...' (expected auto, serial or parallel)").
StatusOr<PlannerChoice> ParsePlannerChoice(std::string_view text, std::string_view field);

inline constexpr EnumName<CellTracking> kCellTrackingNames[] = {{CellTracking::kChecked, "checked"},
                                                                {CellTracking::kFast, "fast"}};
const char* CellTrackingName(CellTracking tracking);

struct PlannerOptions {
  PlannerChoice choice = PlannerChoice::kAiterDispatch;
  PlannerMutant mutant = PlannerMutant::kNone;
  // kChecked (default): Int32Buffer::cells records which elements were written (the checker,
  // the simulator and the tests need it). kFast: values only, byte-identical buffers.
  CellTracking tracking = CellTracking::kChecked;
};

// Checks the request's shapes and values the way get_mla_metadata_v1 and its callers would,
// plus what mlasim needs to model it: indptrs non-empty, non-decreasing and starting at >= 0,
// page_size / kv_granularity powers of two; non-uniform q lengths (uni_seqlen_qo <= 0) only
// dense, with one qo_indptr entry per kv_indptr entry (DecidePlan adds: no folding, no q-tile
// split). Returns InvalidArgument naming the field and the reason.
Status ValidatePlanRequest(const PlanRequest& request);

// Host decisions (§4.1): clusters, fold ratio, pack, qo_split, topk in pages, overhead, tail
// threshold, which planner kernel runs. Errors: InvalidArgument("heads_per_head_k") for head
// counts aiter refuses (the AITER_CHECK of get_mla_metadata_v1_2_device).
StatusOr<PlanDerived> DecidePlan(const PlanRequest& request, PlannerChoice choice);

// Plans a batch: sizes the buffers with get_mla_metadata_info_v1 (batch = kv_indptr.size()-1)
// and fills them as aiter does. Out-of-range reads of the request's own arrays are recorded in
// Plan::input_violations (the dependent cells are Cell::kUndefined), never invented.
// Errors: those of ValidatePlanRequest, GetMlaMetadataInfoV1 and DecidePlan.
StatusOr<Plan> PlanMlaMetadata(const PlanRequest& request, const PlannerOptions& options = {});

// Same as PlanMlaMetadata but into buffers of the given sizes (a caller that allocated them with
// another sizing, e.g. for a larger max batch). Stores beyond a buffer are recorded, not done.
StatusOr<Plan> PlanMlaMetadataInto(const PlanRequest& request, const MetadataSizes& sizes,
                                   const PlannerOptions& options = {});

// Same, rebuilding `*plan` in place: its buffers keep their memory and only the elements the
// previous plan stored are restored to the poison / unwritten state first, so planning costs
// what it writes, not the buffers' capacity (a caller that plans every step, as aiter's caller
// reuses its metadata tensors). The result is byte-for-byte the plan PlanMlaMetadataInto
// returns, provided `*plan` was only ever written through the planner, decode_update or
// Int32Buffer::Store (see Int32Buffer's invariant). On error `*plan` is unspecified.
Status PlanMlaMetadataInto(const PlanRequest& request, const MetadataSizes& sizes,
                           const PlannerOptions& options, Plan* plan);

}  // namespace mlasim::ref
