// File: sim/mutants.h
//
// Deliberately injected bugs in the modelled system (engine, planner, sizing, kernel), switched on
// one at a time to prove that mlasim's properties catch the class of fault they stand for
// (docs/bug-classes.md). Every simulator mutant is data: call-table variables replaced by other
// expressions, contract constants (what-if switches), edits of a kernel contract's JSON, scenario
// overrides (per-call overrides, sizing overrides, engine-profile flags) and the planner mutant;
// none is a second implementation of the code it breaks. The registry with names, classes and
// killing properties of every mutant (these and the code mutants) is fuzz/mutants.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ref/planner.h"
#include "sim/contract.h"
#include "sim/scenario.h"

namespace mlasim::sim {

enum class SimMutant : uint8_t {
  kNone = 0,
  kFoundingFault,            // A: the sparse MTP plan covers running_tokens whatever the profile
  kDraftRowsScheduled,       // A: draft steps 1..K-1 run at B rows whatever the profile
  kKernelAssumes576Rows,     // C: the kernel strides q with 576-column rows whatever rope_dim is
  kSizingScheduledBatch,     // D: plan buffers sized for the scheduled batch, not max_num_seqs
  kSizingPartialMapPerTile,  // D: ... and reduce_partial_map with one entry per q tile
  kStalePlanAfterGrowth,     // E: sparse draft steps >= 2 reuse step 1's plan (lengths grew)
  kZeroKvReadsIndexRow,      // E: zero-KV items read one KV-index entry (the wrong hypothesis)
  kReduceMapOffByOne,        // F: the planner's reduce_partial_map shifted by one q tile
  kNoTailRule,               // B: the planner without the page-1 tail rule (tiny tails)
  kZeroKvPageUnderflow,      // J: a zero-KV item's page count underflows (near-infinite loop)
  // Contract features (docs/contracts.md), each broken as data.
  kContractReadPastTile,          // C: a read statement covers one row past the work's q rows
  kContractDropsOutputWrite,      // B: the write statement of the final o rows removed
  kContractLetKvEndTooFar,        // E: a let statement's value (kv_end) 64 positions too far
  kContractGatherBeforeStart,     // C: a gather starts one position before the work's KV
  kContractLoopOneMoreWork,       // E: a loop's bound walks one work item past its cluster
  kContractGridOneMore,           // C: the launch grid is one workgroup larger than work_indptr
  kContractReduceIfAnyTile,       // E: the reduce's `if` also runs tiles without splits
  kContractKvLoopUnbounded,       // J: a loop's trip count exceeds its bound (the KV block walk)
  kContractZeroKvSkips,           // I: zero_kv = skips on an engine that consumes padding rows
  kContractInvalidIndexFault,     // G: hostile index values dereferenced (invalid_index = fault)
  kContractInvalidIndexClamp,     // G: ... clamped to slot 0 (invalid_index = clamp_to_zero)
  kContractInvalidIndexWrap,      // G: ... wrapped (invalid_index = wrap)
  kContractInvalidIndexMinusOne,  // G: ... only -1 masked, others read (minus_one_masked)
  kContractWhenSkipsPartial0,  // E: a `when` off by one: the piece at partial row 0 writes no logits
  kContractUnitRowsForHeadRows,  // C: q read bounds in head rows (row x heads), `unit` rows
  kContractExtendsWrongBase,     // I: a user's contract extends hk, not asm (inherits its zero_kv)
  kContractEmptyRowsPosInf,      // I: empty_rows = zero_and_pos_inf_lse on an engine that consumes
                                 //    the padding rows' lse (FlashMLA's +inf reaches it)
  // Scenario features (docs/scenario.md), each a disagreement stated as data.
  kCallLaunchGridCaptured,    // A: a per-call override: the decode launched with a captured grid
  kCallPlanFromCapture,       // E: plan_from: the decode consumes the plan captured at capture
  kSizingForOneRequest,       // D: a sizing override: main plan buffers sized for one request
  kPerTokenPlanIgnoresQLens,  // A: the per-token MTP plan covers B x Q tokens, not the ragged T_s
  kCount,
};

const char* SimMutantName(SimMutant m);
// The mutant named `name` (SimMutantName), or kNone when none is.
SimMutant SimMutantByName(const std::string& name);

// An edit of a kernel contract's JSON (the document after `extends`): the value at `pointer` (RFC
// 6901) replaced by `value`, or removed when `value` is null; a member an object lacks is added.
// An edit with `as_written` applies to the world's user contract as written
// (MutantSetting::user_decode_contract), before its `extends` is resolved.
struct ContractEdit {
  CallKind call = CallKind::kDecode;
  std::string pointer;
  nlohmann::json value;
  bool as_written = false;
};

// The world a mutant is searched in, applied with and without it (so the property must hold
// without the mutant there): the kernel variant, the planner dispatch, engine-profile flags
// (sim/call_table.h ParseEngineFlags keys), hostile values in the KV-index buffer (kv_cache
// modelled) and contract edits of a correct kernel (a kernel that masks invalid indices).
struct MutantSetting {
  std::string kernel;  // "" = the scenario's
  bool serial_planner = false;
  nlohmann::json engine_flags = nlohmann::json::object();
  std::vector<KvCacheSpec::IndexValue> hostile_indices;
  std::vector<ContractEdit> contract_edits;
  // A user's decode contract as written (`--contract FILE`), parsed after the as-written edits;
  // null: none.
  nlohmann::json user_decode_contract;
};

// What a simulator mutant changes, as data: call-table variables replaced by other expressions
// (sim/call_table.h), constants of the decode contract (its what-if switches, sim/contract.h),
// edits of a contract, per-call and sizing overrides added to the scenario (a call named
// "verify.{decode}" is the step's decode call: sparse_decode or dense_decode), and the reference
// planner's mutant (ref/planner.h). No mutant is a second implementation of the code it breaks.
struct SimMutantSpec {
  SimMutant id = SimMutant::kNone;
  std::map<std::string, std::string> table_variables;
  std::map<std::string, int64_t> contract_constants;
  ref::PlannerMutant planner = ref::PlannerMutant::kNone;
  std::vector<ContractEdit> contract_edits;
  std::vector<CallOverride> calls;
  std::vector<SizingOverride> sizing;
  MutantSetting setting;
};
const SimMutantSpec& GetSimMutantSpec(SimMutant m);

// `s` in the world of mutant `m` (its MutantSetting), with the mutant's scenario-level changes
// (contract edits, per-call and sizing overrides) when `mutated`; the table variables, contract
// constants and planner mutant are applied by ExpandStep. Errors: InvalidArgument("mutant")
// when an edit does not apply (a contract without that JSON path).
StatusOr<Scenario> MutantScenario(const Scenario& s, SimMutant m, bool mutated = true);

}  // namespace mlasim::sim
