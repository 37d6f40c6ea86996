#include "sim/mutants.h"

#include <vector>

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

const SimMutantSpec& GetSimMutantSpec(SimMutant m) {
  static const std::vector<SimMutantSpec> kSpecs = [] {
    std::vector<SimMutantSpec> v(static_cast<size_t>(SimMutant::kCount));
    auto at = [&](SimMutant id) -> SimMutantSpec& {
      SimMutantSpec& x = v[static_cast<size_t>(id)];
      x.id = id;
      return x;
    };
    at(SimMutant::kNone);
    at(SimMutant::kFoundingFault).table_variables = {{"sparse_plan_tokens", "T_r"}};
    at(SimMutant::kDraftRowsScheduled).table_variables = {{"draft_rows", "B"}};
    at(SimMutant::kKernelAssumes576Rows).table_variables = {{"kernel_q_cols", "576"}};
    at(SimMutant::kSizingScheduledBatch).table_variables = {{"sizing_batch", "B"}};
    at(SimMutant::kSizingPartialMapPerTile).table_variables = {{"sizing_batch", "B"},
                                                               {"partial_map_per_tile", "1"}};
    at(SimMutant::kStalePlanAfterGrowth).table_variables = {{"stale_sparse_draft_plan", "1"}};
    at(SimMutant::kZeroKvReadsIndexRow).contract_constants = {{"zero_kv_reads_index_row", 1}};
    at(SimMutant::kReduceMapOffByOne).planner = ref::PlannerMutant::kPartialMapOffByOne;
    at(SimMutant::kNoTailRule).planner = ref::PlannerMutant::kNoTailRule;
    at(SimMutant::kZeroKvPageUnderflow).contract_constants = {{"page_count_underflows", 1}};
    return v;
  }();
  return kSpecs.at(static_cast<size_t>(m));
}

}  // namespace mlasim::sim
