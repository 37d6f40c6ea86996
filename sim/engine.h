// File: sim/engine.h
//
// Expands one engine step (an MTP iteration: the target's verify step, draft step 0, draft steps
// 1..K-1) into the ordered calls an ATOM-like engine makes, with the behaviour flags of the
// scenario's engine profile. Source: atom-mtp-flow.md §2 (rung choice and padding), §3 (buffer
// capacities), §4 (verify), §5 (drafter), §6 (the table of calls), §7 (DCP).
#pragma once

#include "sim/mutants.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace mlasim::sim {

// The padded rung R for `scheduled_tokens` (this rank's, or the max over DP ranks) and K+1 = Q
// (§2). Returns B when the step runs eagerly. `graph` is set when a captured graph replays.
int32_t ChooseRung(const Scenario& s, int32_t batch, bool* graph);

// Heads the kernel and plan see (§3): H = heads / TP, repeated up to 16; with DCP the gathered
// width H * W rounded up to 16, 32, 64 or 128.
int32_t KernelHeads(const Scenario& s);

// Builds every plan with the reference planner and lists every call. Errors: InvalidArgument
// when a plan the engine would build is refused by the planner (an unsupported head count).
StatusOr<Trace> ExpandStep(const Scenario& s, SimMutant mutant = SimMutant::kNone);

// Hands the aiter plans of a trace that is done with (its plans are left empty) to this thread's
// next ExpandStep calls, which plan into their memory instead of fresh buffers: the planner then
// restores only the elements the old plan stored instead of poisoning every buffer at capacity
// (ref::PlanMlaMetadataInto with a Plan*, byte-for-byte the fresh plan). The plans of a trace
// are written only by the planner and decode_update, as that reuse needs. At most
// kRecycledPlansKept plans are kept per thread: a full pool keeps those whose buffers have the
// most memory. ExpandStep takes the plan of the sizes asked for, else the one whose memory lacks
// the fewest elements, and hands a recycled plan back when the planner refuses the request.
void RecyclePlans(Trace& trace);
constexpr size_t kRecycledPlansKept = 32;
// Plans this thread holds for reuse (tests), the int32 elements their buffers' memory holds
// (tests: a full pool keeps the plans with the most), and dropping them all.
size_t RecycledPlanCount();
int64_t RecycledPlanElements();
void ClearRecycledPlans();

}  // namespace mlasim::sim
