// File: ref/limits.h
//
// mlasim's size limits: ONE table (kLimits) read by every path that turns an input number into
// work or memory: the CLI (plan, check, numerics, replay), the golden reader (`plan
// --check-golden`), the libFuzzer harnesses, the Python bindings and the scenario, case and
// contract parsers. No allocation proportional to an input number happens before that number was
// checked against its limit here. docs/limits.md lists every limit, its default and the memory
// bound it gives.
//
// A user whose real shapes are larger raises a limit, up to its hard maximum, with
// `mlasim --limit NAME=VALUE` (repeatable; any subcommand) or the environment variable
// `MLASIM_LIMITS="NAME=VALUE,NAME=VALUE"` (also read by the Python package and the harnesses).
// Errors beyond a limit name the field, the value, the limit and how to raise it.
#pragma once

#include <cstdint>
#include <string>

#include "ref/metadata.h"
#include "ref/planner.h"
#include "ref/status.h"

namespace mlasim::ref {

enum class LimitId : int32_t {
  kClusters,        // cu_count
  kHeads,           // heads_per_head_k, num_heads_k and their product
  kQlen,            // qlen, max_seqlen_qo, uni_seqlen_qo, sparse tokens per request
  kPageSize,        // page_size
  kGranularity,     // kv_granularity (the planner's own bound, ValidatePlanRequest)
  kTopk,            // topk
  kSplitPerBatch,   // max_split_per_batch
  kRequests,        // requests in one batch (kv_indptr entries - 1)
  kIndptr,          // any kv_indptr / qo_indptr entry; KV tokens of one request
  kVirtualBatches,  // requests x head folds x sparse tokens
  kQRows,           // planned q rows: virtual batches x uni_seqlen_qo
  kKvPositions,     // KV positions and block sums the planner walks (int32 arithmetic)
  kPlanElements,    // int32 elements of the six get_mla_metadata_info_v1 buffers together
  kInputBytes,      // one JSON input file (scenario, contract, request, manifest)
  kScenarioTokens,  // tokens one scenario step schedules
  kTensorValues,    // values of one numerics tensor (q, KV, o)
  kLaunchGrid,      // workgroups of a launch (`plan --launch-grid`, contract grids)
  kLoopTrips,       // iterations of one contract loop before it is reported as a hang
  kCallTrips,       // iterations of one call's contract loops in all (nested loops multiply)
  kJsonDepth,       // nesting of arrays and objects in one JSON input (sim/json_input.h)
  kJsonValues,      // values (of any kind, containers too) in one JSON input
  kContractStatements,  // statements of one contract's program, nested ones included
  kCount,
};

// One row of the table.
struct LimitSpec {
  LimitId id;
  const char* name;       // as typed after --limit ("requests")
  int64_t default_value;  // what mlasim enforces unless raised
  int64_t hard_max;       // what no setting can exceed (keeps int32 / int64 arithmetic exact)
  const char* what;       // what it bounds, for messages and `mlasim limits`
  const char* memory;     // the memory it bounds at its default (docs/limits.md)
};

// The table, in LimitId order.
extern const LimitSpec kLimits[static_cast<int>(LimitId::kCount)];

// The value in force for `id` (the default unless raised or lowered). Thread-safe to read.
int64_t Limit(LimitId id);

// Sets limits from "NAME=VALUE[,NAME=VALUE...]" (blanks around items allowed; "" sets nothing).
// Errors (InvalidArgument, field `field`): an empty item (a leading, trailing or doubled comma),
// an unknown name (listing the known ones), a name given twice, a value that is not a decimal
// integer, below 1, or above the limit's hard maximum. Nothing is changed on error.
// Call before starting threads (the CLI does it while parsing its arguments).
Status SetLimits(const std::string& spec, const std::string& field = "--limit");

// Applies $MLASIM_LIMITS when set (field "MLASIM_LIMITS"); OK when unset.
Status SetLimitsFromEnvironment();

// Every limit back to its default (tests).
void ResetLimits();

// ResourceExhausted(field, "<what> is <got>, above mlasim's limit of <limit> (raise it with
// --limit <name>=N or MLASIM_LIMITS=<name>=N, up to <hard max>)"); at the hard maximum "(<name>
// is at its hard maximum)", or, for a limit whose default is its hard maximum, why it cannot be
// raised.
Status TooLarge(const std::string& field, int64_t got, LimitId id, const std::string& what);

// A request's own numbers against the limits, before anything proportional to them is allocated
// or walked. Errors name the planner field (cu_count, kv_indptr[3], max_seqlen_qo, ...).
Status CheckRequestLimits(const PlanRequest& request);

// Bounds that need the host decisions (DecidePlan): the planner's KV positions, block sums and q
// rows, computed in int32 as aiter does, stay below 2^31, and its walk stays short.
Status CheckPlannerLimits(const PlanRequest& request, const PlanDerived& derived);

// The info_v1 buffers together hold at most Limit(kPlanElements) int32 elements (a uint64 counts
// as two). Field "batch_size".
Status CheckSizesLimit(const MetadataSizes& sizes);

// All three, in order (validation first: the limits assume a well-formed request): what every
// path runs before PlanMlaMetadata on an input it did not build itself.
Status CheckPlanInputLimits(const PlanRequest& request,
                            PlannerChoice choice = PlannerChoice::kAiterDispatch);

}  // namespace mlasim::ref
