#include "sim/mutants.h"

namespace mlasim::sim {

const char* SimMutantName(SimMutant m) {
  switch (m) {
    case SimMutant::kNone: return "none";
    case SimMutant::kFoundingFault: return "engine-sparse-plan-over-running-tokens";
    case SimMutant::kDraftRowsScheduled: return "engine-draft-steps-at-scheduled-rows";
    case SimMutant::kKernelAssumes576Rows: return "kernel-assumes-576-column-rows";
    case SimMutant::kSizingScheduledBatch: return "sizing-for-scheduled-batch";
    case SimMutant::kSizingPartialMapPerTile: return "sizing-partial-map-one-per-tile";
    case SimMutant::kStalePlanAfterGrowth: return "engine-stale-plan-after-lengths-grew";
    case SimMutant::kZeroKvReadsIndexRow: return "kernel-zero-kv-reads-index-row";
    case SimMutant::kReduceMapOffByOne: return "planner-reduce-map-off-by-one-tile";
    case SimMutant::kNoTailRule: return "planner-drops-tail-rule";
    case SimMutant::kZeroKvPageUnderflow: return "kernel-zero-kv-page-count-underflow";
    case SimMutant::kCount: break;
  }
  return "?";
}

}  // namespace mlasim::sim
