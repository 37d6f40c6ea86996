// File: sim/mutants.h
//
// Deliberately injected bugs in the modelled system (engine, planner, sizing, kernel), switched on
// one at a time to prove that mlasim's properties catch the class of fault they stand for
// (bug-classes.md). The registry with names, classes and killing properties is fuzz/mutants.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ref/planner.h"

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
  kCount,
};

const char* SimMutantName(SimMutant m);

// What a simulator mutant changes, as data: call-table variables replaced by other expressions
// (sim/call_table.h), constants of the decode contract (its what-if switches, sim/contract.h),
// and the reference planner's mutant (ref/planner.h). The engine applies all three; no mutant is
// a second implementation of the code it breaks.
struct SimMutantSpec {
  SimMutant id = SimMutant::kNone;
  std::map<std::string, std::string> table_variables;
  std::map<std::string, int64_t> contract_constants;
  ref::PlannerMutant planner = ref::PlannerMutant::kNone;
};
const SimMutantSpec& GetSimMutantSpec(SimMutant m);

}  // namespace mlasim::sim
